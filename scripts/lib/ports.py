"""Loopback ports for the scripts' servers and daemons."""

import random
import socket


def free_port():
    """A loopback port nothing listens on, below the kernel's ephemeral range.

    A port the kernel hands out for `bind(0)` is one it also hands to outgoing connections: a node's connections to
    PostgreSQL once took the port a second node was about to listen on ("Address already in use")."""
    low, _ = ephemeral_range()
    for _ in range(1000):
        port = random.randrange(10000, max(low, 10001))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free loopback port below the ephemeral range")


def ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as file:
            low, high = (int(part) for part in file.read().split())
            return low, high
    except (OSError, ValueError):
        return 32768, 60999
