#!/usr/bin/env python3
"""The daemon benchmark: `downpour daemon` and `aria2c --enable-rpc` side by side, over their JSON-RPC.

Usage: rpc_bench.py --downpour BIN --base URL --many-dir DIR --work DIR [--reps N] [--adds N] [--settle S]

Cases, each run for both daemons in one run (the order alternates by repetition):
  adds     both daemons at once: N addUri calls (default 10,000) each, in system.multicall batches of 100, added
           paused, a batch to one daemon then the same batch to the other: each one's total time
  latency  with those N waiting in each: tellWaiting(0, 1000) (--waiting-calls per daemon, default 500) and
           tellStatus (--latency-calls per daemon, default 20,000) latency, p50 and p99, in blocks of 10 and 100
           calls that alternate between the daemons; and each one's peak RSS. A p99 rests on a hundredth of the
           calls: 200 of 20,000 (with 5,000 it rested on 50, and one busy moment of the machine moved it).
           Timed twice: on a raw kept-alive connection, from the request's one write to the reply's last byte
           (tellStatus_p50_ms...: the daemon's latency), and through Python's http.client with the reply parsed
           (tellStatus_py_p50_ms...: what a Python script sees; the client's own work is about half of it).
           The raw tellStatus calls are made twice more with the placement fixed (on a machine of two CPUs or
           more), in calls that alternate one by one between the daemons: every thread of the client and of both
           daemons on one CPU (tellStatus_same_...), then the daemons on another CPU than the client's
           (tellStatus_cross_...). Left to the kernel, the raw latency
           is bimodal (about 30 us when a daemon shares the client's CPU, about 100 us when each call wakes an
           idle CPU twice), and which daemon gets which differs from run to run
  many     the 1,000 files of --many-dir (served at URL/many/NAME) added over RPC with
           max-concurrent-downloads 16, on a fresh daemon: time from the first add until all are complete,
           every file's SHA-256 checked against the manifest (--many-dir/../many.sha256 format: "HASH  NAME")
Prints one table per case with medians and the ratio downpour / aria2c.
"""

import argparse
import base64
import hashlib
import http.client
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from ports import free_port  # noqa: E402

SECRET = "bench-secret"


class RawRPC:
    """One kept-alive connection that sends each request in one write and times it from that write to the reply's
    last byte: the daemon's latency, with next to none of the client's own work in it. (Python's http.client
    sends a request's head and body in two writes, parses the reply's headers with the email package and the
    body with json inside the timed call: about as much time as the daemon's part, and most of the noise.)"""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.port = port
        self.buffer = bytearray(4 << 20)
        self.view = memoryview(self.buffer)

    def request(self, method, *params):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                           "params": ["token:" + SECRET] + list(params)}).encode()
        return (b"POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (self.port, len(body), body))

    def timed(self, request):
        """Sends a request made by `request`; returns (seconds to the reply's last byte, the reply's result). The
        reply is read into a buffer made once: a fresh 1 MiB `recv` per call would map and unmap memory inside
        the timed part, which costs the client more than the daemon's answer."""
        buffer, view = self.buffer, self.view
        start = time.perf_counter()
        self.sock.sendall(request)
        filled = self.sock.recv_into(view)
        total = None
        while True:
            if total is None:
                end = buffer.find(b"\r\n\r\n", 0, filled)
                if end >= 0:
                    head = bytes(buffer[:end]).lower()
                    at = head.find(b"\r\ncontent-length:")
                    if at < 0:
                        raise RuntimeError(f"reply without Content-Length: {head!r}")
                    length = int(head[at + 17:].split(b"\r\n", 1)[0])
                    total = end + 4 + length
                    if total > len(buffer):
                        raise RuntimeError(f"reply of {total} bytes does not fit the buffer")
            if total is not None and filled >= total:
                break
            received = self.sock.recv_into(view[filled:])
            if not received:
                raise RuntimeError("connection closed mid-reply")
            filled += received
        elapsed = time.perf_counter() - start
        if not head.startswith(b"http/1.1 200") or filled != total:
            raise RuntimeError(f"bad reply: {head!r}, {filled} bytes for {total}")
        reply = json.loads(bytes(buffer[end + 4:total]))
        if "error" in reply:
            raise RuntimeError(f"error reply: {reply['error']}")
        return elapsed, reply["result"]


class RPC:
    def __init__(self, port):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.counter = 0

    def call(self, method, *params):
        if method.startswith("aria2."):
            params = ("token:" + SECRET,) + params
        self.counter += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.counter, "method": method, "params": list(params)})
        self.conn.request("POST", "/jsonrpc", body=body, headers={"Content-Type": "application/json"})
        response = self.conn.getresponse()
        data = json.loads(response.read())
        if "error" in data:
            raise RuntimeError(f"{method}: {data['error']}")
        return data["result"]

    def multicall(self, calls):
        entries = [{"methodName": m, "params": ["token:" + SECRET] + list(p)} for m, p in calls]
        return self.call("system.multicall", entries)


FINISHED_DIRS = []


class Daemon:
    def __init__(self, name, binary, work, extra=()):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix=f"{name}-", dir=work)
        self.downloads = os.path.join(self.dir, "downloads")
        os.makedirs(self.downloads)
        self.port = free_port()
        if name == "aria2c":
            argv = [
                binary, "--enable-rpc", f"--rpc-listen-port={self.port}", f"--rpc-secret={SECRET}",
                f"--dir={self.downloads}", "--file-allocation=none", "--max-download-result=20000",
                "--quiet", "--no-conf", *extra,
            ]
        else:
            argv = [
                binary, "daemon", "--rpc-listen-port", str(self.port), "--rpc-secret", SECRET,
                "-d", self.downloads, "--state-dir", os.path.join(self.dir, "state"), *extra,
            ]
        self.log = open(os.path.join(self.dir, "daemon.log"), "wb")
        self.process = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.rpc = RPC(self.port)
                self.rpc.call("aria2.getVersion")
                break
            except (ConnectionError, OSError, http.client.HTTPException):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not start; see {self.log.name}")
                time.sleep(0.05)

    def peak_rss_kib(self):
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        # Removed when the script ends: on ext4 without a journal, creating a file makes the kernel look past every
        # inode freed in the last minute (or six), which would slow the next daemon's downloads.
        FINISHED_DIRS.append(self.dir)


def percentile(values, p):
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(p / 100 * (len(ordered) - 1)))))
    return ordered[index]


def case_adds_and_latency(daemons, args):
    """Both daemons at once, each with its own N waiting downloads; every timed step alternates between them
    (batch by batch, block of calls by block of calls), so that the machine's changes of pace over the run fall on
    both alike."""
    running = []
    settle(args)

    def alternate(count, call, block):
        """`count` calls per daemon, each timed, in blocks of `block` calls to one daemon and then the same calls
        to the other (which goes first alternates): a daemon's caches stay as warm as with calls to it alone,
        while a change of the machine's pace during the run falls on both."""
        times = {d.name: [] for d in running}
        for first in range(0, count, block):
            for daemon in (running if first // block % 2 == 0 else list(reversed(running))):
                for n in range(first, min(first + block, count)):
                    start = time.perf_counter()
                    call(daemon, n)
                    times[daemon.name].append(time.perf_counter() - start)
        return times

    try:
        for name, binary in daemons:
            running.append(Daemon(name, binary, args.work))
        calls = [("aria2.addUri", ([f"{args.base}/many/f{i % 1000:04d}.bin"], {"pause": "true", "out": f"a{i}.bin"}))
                 for i in range(args.adds)]
        gids = {d.name: [] for d in running}

        def add_batch(daemon, n):
            for r in daemon.rpc.multicall(calls[n * 100:(n + 1) * 100]):
                if not isinstance(r, list):
                    raise RuntimeError(f"{daemon.name}: addUri failed: {r}")
                gids[daemon.name].append(r[0])

        adds = {name: sum(times) for name, times in alternate((args.adds + 99) // 100, add_batch, 1).items()}
        for daemon in running:
            waiting = daemon.rpc.call("aria2.getGlobalStat")["numWaiting"]
            if int(waiting) != args.adds:
                raise RuntimeError(f"{daemon.name}: {waiting} waiting, expected {args.adds}")

        def tell_waiting(daemon, n):
            assert len(daemon.rpc.call("aria2.tellWaiting", 0, 1000)) == 1000

        tell_waiting_py_times = alternate(args.waiting_calls, tell_waiting, 10)
        # The same random positions in both queues.
        rng = random.Random(7)
        picks = [rng.randrange(args.adds) for _ in range(args.latency_calls)]

        def tell_status(daemon, n):
            daemon.rpc.call("aria2.tellStatus", gids[daemon.name][picks[n]])

        tell_status_py_times = alternate(args.latency_calls, tell_status, 100)

        # The same calls over raw connections, timed from the request's one write to the reply's last byte.
        raw = {d.name: RawRPC(d.port) for d in running}

        def alternate_raw(count, make, check, block):
            times = {d.name: [] for d in running}
            for first in range(0, count, block):
                for daemon in (running if first // block % 2 == 0 else list(reversed(running))):
                    connection = raw[daemon.name]
                    for n in range(first, min(first + block, count)):
                        elapsed, result = connection.timed(make(connection, daemon, n))
                        check(daemon, n, result)
                        times[daemon.name].append(elapsed)
            return times

        def waiting_page(daemon, n, result):
            if len(result) != 1000:
                raise RuntimeError(f"{daemon.name}: tellWaiting gave {len(result)} entries")

        def status_of_pick(daemon, n, result):
            if result["gid"] != gids[daemon.name][picks[n]]:
                raise RuntimeError(f"{daemon.name}: tellStatus answered for {result['gid']}")

        tell_waiting_times = alternate_raw(
            args.waiting_calls, lambda c, d, n: c.request("aria2.tellWaiting", 0, 1000), waiting_page, 10)

        def tell_status_raw(block):
            return alternate_raw(
                args.latency_calls, lambda c, d, n: c.request("aria2.tellStatus", gids[d.name][picks[n]]),
                status_of_pick, block)

        tell_status_times = tell_status_raw(100)
        # Again with the placement fixed, so that the kernel's choice of CPUs is the same for both daemons: every
        # thread of both daemons on the client's CPU, then on another CPU than the client's. The calls alternate
        # one by one: a burst of the host's noise (10 ms is 100 calls) then falls on both daemons alike, where in
        # blocks of 100 it could hold half of the 200 calls one daemon's p99 rests on.
        placed = {}
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) >= 2:
            try:
                for placement, daemon_cpu in (("same", cpus[0]), ("cross", cpus[1])):
                    pin(os.getpid(), {cpus[0]})
                    for d in running:
                        pin(d.process.pid, {daemon_cpu})
                    placed[placement] = tell_status_raw(1)
            finally:
                for pid in [os.getpid()] + [d.process.pid for d in running]:
                    pin(pid, set(cpus))
        for connection in raw.values():
            connection.sock.close()
        placed_rows = {
            d.name: {
                f"tellStatus_{placement}_{q}_ms": percentile(times[d.name], int(q[1:])) * 1000
                for placement, times in placed.items()
                for q in ("p50", "p99")
            }
            for d in running
        }
        return {
            d.name: {
                "adds_s": adds[d.name],
                "tellWaiting_p50_ms": percentile(tell_waiting_times[d.name], 50) * 1000,
                "tellWaiting_p99_ms": percentile(tell_waiting_times[d.name], 99) * 1000,
                "tellStatus_p50_ms": percentile(tell_status_times[d.name], 50) * 1000,
                "tellStatus_p99_ms": percentile(tell_status_times[d.name], 99) * 1000,
                "tellWaiting_py_p50_ms": percentile(tell_waiting_py_times[d.name], 50) * 1000,
                "tellWaiting_py_p99_ms": percentile(tell_waiting_py_times[d.name], 99) * 1000,
                "tellStatus_py_p50_ms": percentile(tell_status_py_times[d.name], 50) * 1000,
                "tellStatus_py_p99_ms": percentile(tell_status_py_times[d.name], 99) * 1000,
                **placed_rows[d.name],
                "peak_rss_mib": d.peak_rss_kib() / 1024,
            }
            for d in running
        }
    finally:
        for daemon in running:
            daemon.stop()


def pin(pid, cpus):
    """Puts every thread of process `pid` on `cpus` (a thread that ended meanwhile is skipped)."""
    for thread in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(thread), cpus)
        except OSError:
            pass


def settle(args):
    """As before every run of bench.sh: the kernel's writeback of what ran before (a 4 GiB file in the `rss`
    case) must not land in this run, where it would slow whichever daemon writes to the disk at that moment."""
    os.sync()
    time.sleep(args.settle)


def case_many(name, binary, args, manifest):
    settle(args)
    extra = ["--max-concurrent-downloads=16"] if name == "aria2c" else ["-j", "16"]
    daemon = Daemon(name, binary, args.work, extra)
    try:
        names = sorted(manifest)
        calls = [("aria2.addUri", ([f"{args.base}/many/{n}"], {"out": n})) for n in names]
        start = time.perf_counter()
        for i in range(0, len(calls), 100):
            for r in daemon.rpc.multicall(calls[i:i + 100]):
                if not isinstance(r, list):
                    raise RuntimeError(f"{name}: addUri failed: {r}")
        deadline = time.monotonic() + 300
        while True:
            stat = daemon.rpc.call("aria2.getGlobalStat")
            if int(stat["numActive"]) == 0 and int(stat["numWaiting"]) == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name}: not done after 300 s: {stat}")
            time.sleep(0.01)
        elapsed = time.perf_counter() - start
        stopped = daemon.rpc.call("aria2.tellStopped", 0, 2000, ["status"])
        complete = sum(1 for s in stopped if s["status"] == "complete")
        good = 0
        for n in names:
            path = os.path.join(daemon.downloads, n)
            if os.path.exists(path):
                with open(path, "rb") as f:
                    if hashlib.sha256(f.read()).hexdigest() == manifest[n]:
                        good += 1
        return {"many_s": elapsed, "complete": complete, "sha_ok": good, "peak_rss_mib": daemon.peak_rss_kib() / 1024}
    finally:
        daemon.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--downpour", required=True)
    parser.add_argument("--aria2c", default=shutil.which("aria2c") or "aria2c")
    parser.add_argument("--base", required=True)
    parser.add_argument("--many-dir", required=True)
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--adds", type=int, default=10000)
    parser.add_argument("--latency-calls", type=int, default=20000)
    parser.add_argument("--waiting-calls", type=int, default=500)
    parser.add_argument("--cases", default="adds,many")
    parser.add_argument("--settle", type=float, default=1.0)
    args = parser.parse_args()

    manifest = {}
    with open(args.manifest) as f:
        for line in f:
            digest, name = line.split()
            manifest[name.lstrip("*")] = digest
    daemons = [("downpour", args.downpour), ("aria2c", args.aria2c)]
    cases = args.cases.split(",")
    results = {d: [] for d, _ in daemons}
    for rep in range(args.reps):
        order = daemons if rep % 2 == 0 else list(reversed(daemons))
        rows = {name: {} for name, _ in daemons}
        if "adds" in cases:
            for name, row in case_adds_and_latency(order, args).items():
                rows[name].update(row)
        if "many" in cases:
            for name, binary in order:
                row = rows[name]
                many = case_many(name, binary, args, manifest)
                row["many_s"] = many["many_s"]
                row["many_complete"] = many["complete"]
                row["many_sha_ok"] = many["sha_ok"]
                row["peak_rss_mib"] = max(row.get("peak_rss_mib", 0), many["peak_rss_mib"])
        for name, _ in order:
            row = rows[name]
            print(f"rep {rep + 1} {name}: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                                       for k, v in row.items()), file=sys.stderr)
            results[name].append(row)

    keys = list(results["downpour"][0].keys())
    print()
    print(f"daemon benchmark: {args.adds} addUri in multicall batches of 100 (added paused), "
          f"{args.waiting_calls} tellWaiting(0,1000) and {args.latency_calls} tellStatus with {args.adds} "
          f"waiting (both daemons up, blocks of calls alternating between them), 1,000 x 64 KiB over RPC with 16 at a "
          f"time; {args.reps} rep(s), medians")
    print(f"{'metric':<24} {'downpour':>12} {'aria2c':>12} {'downpour/aria2c':>16}")
    for key in keys:
        d = statistics.median(r[key] for r in results["downpour"])
        a = statistics.median(r[key] for r in results["aria2c"])
        ratio = f"{d / a:.2f}" if a else "-"
        print(f"{key:<24} {d:>12.3f} {a:>12.3f} {ratio:>16}")
    # The medians hide how far the repetitions were apart: each one's own ratio, in the order they ran.
    print("each repetition's downpour/aria2c:")
    for key in keys:
        if key.endswith(("_complete", "_ok")):
            continue
        ratios = [d[key] / a[key] if a[key] else float("nan") for d, a in zip(results["downpour"], results["aria2c"])]
        print(f"  {key:<24} " + " ".join(f"{r:.2f}" for r in ratios))


if __name__ == "__main__":
    try:
        main()
    finally:
        for directory in FINISHED_DIRS:
            shutil.rmtree(directory, ignore_errors=True)
