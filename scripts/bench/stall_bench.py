#!/usr/bin/env python3
"""Stalled connections against an RPC daemon: Downpour's and aria2c's, side by side in one run.

For each daemon: open N connections that send half a request and then nothing, then report
- the resident memory the daemon gained, per connection it still holds open;
- the latency of a normal call (aria2.getGlobalStat over a kept-alive connection) before and meanwhile;
- how long until the daemon has closed every stalled connection.

usage: stall_bench.py --downpour BIN [--aria2c PATH] [--connections 2000] [--calls 400]
Only loopback addresses are used; every wait has a deadline.
"""
import argparse
import http.client
import json
import os
import resource
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from ports import free_port  # noqa: E402

CALL = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "aria2.getGlobalStat", "params": []})


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wait_ready(port, process, deadline=60):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if process.poll() is not None:
            raise RuntimeError(f"daemon exited with {process.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("POST", "/jsonrpc", CALL)
            c.getresponse().read()
            c.close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("daemon not ready")


def latencies(port, calls):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        c.request("POST", "/jsonrpc", CALL, {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        times.append(time.perf_counter() - start)
        if r.status != 200:
            raise RuntimeError(f"call answered {r.status}")
    c.close()
    times.sort()
    return times[len(times) // 2] * 1000, times[min(len(times) - 1, int(len(times) * 0.99))] * 1000


def open_stalled(port, count):
    half = f"POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 100\r\n\r\n{{".encode()
    sockets = []
    for _ in range(count):
        s = socket.socket()
        s.settimeout(10)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(half)
        except OSError:
            s.close()
            continue
        s.setblocking(False)
        sockets.append(s)
    return sockets


def still_open(sockets):
    """Reads what is waiting; returns the sockets the daemon has not closed."""
    alive = []
    for s in sockets:
        try:
            data = s.recv(65536)
            if data == b"":
                s.close()
                continue
            alive.append(s)  # an answer without a close (none expected)
        except BlockingIOError:
            alive.append(s)
        except OSError:
            s.close()
    return alive


def measure(name, command, port, connections, calls, deadline):
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               preexec_fn=raise_fd_limit)
    try:
        wait_ready(port, process)
        latencies(port, 50)  # warm up
        base_rss = rss_kib(process.pid)
        idle_p50, idle_p99 = latencies(port, calls)
        started = time.monotonic()
        sockets = open_stalled(port, connections)
        opened = len(sockets)
        time.sleep(1.0)
        sockets = still_open(sockets)
        held = len(sockets)
        flood_rss = rss_kib(process.pid)
        load_p50, load_p99 = latencies(port, calls)
        flood_done = time.monotonic()
        close_time = None
        end = flood_done + deadline
        while time.monotonic() < end:
            sockets = still_open(sockets)
            if not sockets:
                close_time = time.monotonic() - flood_done
                break
            time.sleep(0.25)
        per_connection = (flood_rss - base_rss) / held if held else float("nan")
        return {
            "name": name, "opened": opened, "held": held, "rss_base_kib": base_rss, "rss_flood_kib": flood_rss,
            "kib_per_connection": per_connection, "idle_p50_ms": idle_p50, "idle_p99_ms": idle_p99,
            "load_p50_ms": load_p50, "load_p99_ms": load_p99,
            "all_closed_after_s": close_time, "still_open_at_deadline": len(sockets),
            "flood_seconds": flood_done - started,
        }
    finally:
        for s in locals().get("sockets", []):
            s.close()
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--downpour", required=True)
    parser.add_argument("--aria2c", default=shutil.which("aria2c"))
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--deadline", type=float, default=150)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--downpour-arg", action="append", default=[],
                        help="one more argument for downpour daemon (e.g. --downpour-arg=--rpc-max-connections=4096)")
    args = parser.parse_args()
    raise_fd_limit()
    work = tempfile.mkdtemp(prefix="downpour-stall-")
    results = []
    try:
        port = free_port()
        results.append(measure(
            "downpour", [args.downpour, "daemon", "--rpc-listen-port", str(port), "--state-dir", work + "/state",
                         "--dir", work + "/dl"] + args.downpour_arg, port, args.connections, args.calls, args.deadline))
        if args.aria2c:
            port = free_port()
            results.append(measure(
                "aria2c", [args.aria2c, "--enable-rpc", "--rpc-listen-port", str(port), "--dir", work + "/a2",
                           "--no-conf", "--quiet"], port, args.connections, args.calls, args.deadline))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'daemon':10} {'opened':>6} {'held':>5} {'KiB/conn':>9} {'idle p50/p99 ms':>16} "
          f"{'loaded p50/p99 ms':>18} {'all closed after':>17}")
    for r in results:
        closed = f"{r['all_closed_after_s']:.1f} s" if r["all_closed_after_s"] is not None \
            else f"{r['still_open_at_deadline']} open"
        print(f"{r['name']:10} {r['opened']:>6} {r['held']:>5} {r['kib_per_connection']:>9.1f} "
              f"{r['idle_p50_ms']:>7.3f}/{r['idle_p99_ms']:<8.3f} {r['load_p50_ms']:>8.3f}/{r['load_p99_ms']:<9.3f} "
              f"{closed:>17}")
    if len(results) == 2 and results[1]["kib_per_connection"]:
        d, a = results
        print(f"ratios downpour/aria2c: KiB per connection {d['kib_per_connection'] / a['kib_per_connection']:.2f}, "
              f"loaded p50 {d['load_p50_ms'] / a['load_p50_ms']:.2f}, loaded p99 {d['load_p99_ms'] / a['load_p99_ms']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    bad = [r["name"] for r in results if r["all_closed_after_s"] is None and r["name"] == "downpour"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
