#!/usr/bin/env python3
"""Samples the bytes a network device has received, for the far-link cases' timelines (stdlib only).

    rxsampler.py DEVICE INTERVAL_S

Run inside the clients' network namespace (`ip netns exec NS rxsampler.py dpb1 0.002`). Prints "ready" once it
has its first sample, then keeps "MONOTONIC RX_BYTES" pairs in memory (CLOCK_MONOTONIC is the same in every
namespace, so the driver lines them up with its own clock) and writes them all to standard output when it gets
SIGTERM, so that no write competes with the client being measured.
"""

import signal
import sys
import time


def rx_bytes(device):
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, counters = line.partition(":")
            if name.strip() == device:
                return int(counters.split()[0])
    raise SystemExit(f"rxsampler: no device {device} in /proc/net/dev")


def main():
    device, interval = sys.argv[1], float(sys.argv[2])
    samples = [(time.monotonic(), rx_bytes(device))]
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    print("ready", flush=True)
    while running[0]:
        time.sleep(interval)
        samples.append((time.monotonic(), rx_bytes(device)))
    sys.stdout.write("".join("%.6f %d\n" % s for s in samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
