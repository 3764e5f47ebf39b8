#!/usr/bin/env python3
"""The fleet benchmark: daemons sharing a queue in PostgreSQL (a throw-away cluster) against one daemon, and the
queue in PostgreSQL beside the SQLite daemon and aria2c.

Usage: fleet_bench.py --downpour BIN --work DIR [--reps N] [--files N] [--size BYTES] [--cap RATE] [--adds N]
                      [--node-arg ARG]... [--rows one,three,kill,kills,database] [--database-at FRACTION]

Cases, in one run (the order of the rows alternates by repetition):
  scale    --files files of --size bytes from an nginx on loopback (no limit of its own), added through one node;
           each node capped at --cap (--max-overall-download-limit, a stand-in for one machine's link): one node,
           three nodes, three nodes with one killed (-9) a third of the way in and restarted a second later, three
           nodes with one killed three times at random moments 1-3 s apart (restarted at once each time), and three
           nodes whose database is restarted (pg_ctl stop -m fast, 2 s down, start) a third of the way in (or
           --database-at of it). --rows picks rows (keys one, three, kill, kills, database; default all).
           Time from the first add until every file is complete (SHA-256 checked, each once in tellStopped); the
           ratio one node / this; the bytes nginx sent per file (its log), in all and for the worst file.
  adds     --adds addUri calls (paused, system.multicall batches of 100) into downpour with --queue (PostgreSQL),
           downpour with its SQLite store, and aria2c --enable-rpc; then with them waiting, tellWaiting(0, 1000)
           and tellStatus latency (p50, p99, on one kept-alive connection per daemon), and each daemon's RSS.
Prints one table per case with medians.
"""

import argparse
import hashlib
import http.client
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from fleet import Nginx, Node, Postgres, call, sha256, wait_for  # noqa: E402
from ports import free_port  # noqa: E402


def note(message):
    print(f"fleet-bench: {message}", file=sys.stderr, flush=True)


class Connection:
    """One kept-alive JSON-RPC connection, timed per call."""

    def __init__(self, port):
        self.client = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def call(self, method, *params):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)})
        started = time.perf_counter()
        self.client.request("POST", "/jsonrpc", body, {"Content-Type": "application/json"})
        answer = json.loads(self.client.getresponse().read())
        elapsed = time.perf_counter() - started
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"], elapsed


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def scale_run(args, postgres, nginx, names, nodes_count, fault, rep):
    """One batch through a fresh database and directory; returns the seconds until every file is complete."""
    database = postgres.database(f"scale_{rep}_{nodes_count}_{fault or 'none'}")
    downloads = tempfile.mkdtemp(dir=args.work, prefix="scale-")
    nodes = [Node(args.downpour, f"node{index}", database, args.work, downloads,
                  ["--max-overall-download-limit", args.cap, *args.node_arg])
             for index in range(nodes_count)]
    try:
        for node in nodes:
            node.start()
        calls = [{"methodName": "aria2.addUri", "params": [[f"http://127.0.0.1:{nginx.port}/{name}"]]}
                 for name in names]
        started = time.monotonic()
        added = call(nodes[0].port, "system.multicall", calls)
        assert all(isinstance(answer, list) for answer in added), added
        expected = len(names) * args.size / (parse_rate(args.cap) * nodes_count)
        events = faults(fault, expected, nodes, postgres, args.database_at)

        def done():
            while events and time.monotonic() - started >= events[0][0]:
                events.pop(0)[1]()
            stat = call(nodes[0].port, "aria2.getGlobalStat")
            return stat["numActive"] == "0" and stat["numWaiting"] == "0" and not events

        wait_for("the batch", done, limit=max(600, 10 * expected))
        elapsed = time.monotonic() - started
        stopped = call(nodes[0].port, "aria2.tellStopped", 0, 10000, ["gid", "status"])
        assert len(stopped) == len(names) and all(entry["status"] == "complete" for entry in stopped), stopped
        assert len({entry["gid"] for entry in stopped}) == len(names), "a download ended twice"
        return elapsed, downloads
    finally:
        for node in nodes:
            node.stop()


def faults(fault, expected, nodes, postgres, database_at):
    """What happens to the fleet during a run, as (seconds after the add, action), in order."""
    def kill(node, down):
        def action():
            node.kill()
            note(f"killed {node.name} (-9)")
            time.sleep(down)
            node.start()
        return action

    def restart_database():
        note("restarting the database")
        postgres.restart(2.0)

    if fault == "kill":
        return [(expected / 3, kill(nodes[1], 1.0))]
    if fault == "kills":
        moments, moment = [], 0.0
        for _ in range(3):
            moment += random.uniform(1, 3)
            moments.append((moment, kill(nodes[1], 0.0)))
        return moments
    if fault == "database":
        return [(expected * database_at, restart_database)]
    return []


def served_per_file(nginx, since, names, size):
    """What nginx sent for each file since `since`, as a multiple of its size."""
    sent = {}
    for path, _, _, count, *_ in nginx.requests(since):
        sent[path] = sent.get(path, 0) + count
    return [sent.get(f"/{name}", 0) / size for name in names]


def parse_rate(text):
    units = {"K": 1024, "M": 1024 * 1024, "G": 1024 ** 3}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def scale(args, postgres):
    www = tempfile.mkdtemp(dir=args.work, prefix="www-")
    digests = {}
    for index in range(args.files):
        data = os.urandom(args.size)
        name = f"s{index}.bin"
        with open(f"{www}/{name}", "wb") as file:
            file.write(data)
        digests[name] = hashlib.sha256(data).hexdigest()
    nginx = Nginx(f"{args.work}/nginx", www, None)
    keys = {"one": "1 node", "three": "3 nodes", "kill": "3 nodes, one kill", "kills": "3 nodes, three kills",
            "database": "3 nodes, database restart"}
    picked = {keys[key] for key in args.rows.split(",")}
    rows = [(label, count, fault) for label, count, fault in [
        ("1 node", 1, None), ("3 nodes", 3, None), ("3 nodes, one kill", 3, "kill"),
        ("3 nodes, three kills", 3, "kills"), ("3 nodes, database restart", 3, "database")] if label in picked]
    times = {label: [] for label, _, _ in rows}
    served = {label: [] for label, _, _ in rows}
    try:
        for rep in range(args.reps):
            order = rows if rep % 2 == 0 else list(reversed(rows))
            for label, count, fault in order:
                mark = nginx.log_size()
                elapsed, downloads = scale_run(args, postgres, nginx, sorted(digests), count, fault, rep)
                for name, digest in digests.items():
                    assert sha256(f"{downloads}/{name}") == digest, f"{name} differs"
                shutil.rmtree(downloads, ignore_errors=True)
                ratios = served_per_file(nginx, mark, sorted(digests), args.size)
                times[label].append(elapsed)
                served[label].append(ratios)
                note(f"scale rep {rep + 1}: {label}: {elapsed:.2f} s, served {statistics.mean(ratios):.2f}x in all, "
                     f"worst file {max(ratios):.2f}x")
    finally:
        nginx.stop()
    one = statistics.median(times["1 node"]) if times.get("1 node") else None
    print(f"\nscale: {args.files} x {args.size / 1e6:g} MB, each node capped at {args.cap}/s, "
          f"{args.reps} rep(s), medians; bytes nginx sent per byte of a file (all runs of the row)")
    print(f"{'':28} {'time':>9} {'1 node / this':>14} {'served, all':>12} {'worst file':>11} {'files > 1.2x':>13}")
    for label, _, _ in rows:
        median = statistics.median(times[label])
        ratios = [ratio for run in served[label] for ratio in run]
        over = sum(1 for ratio in ratios if ratio > 1.2) / len(served[label])
        speedup = f"{one / median:13.2f}x" if one else f"{'-':>14}"
        print(f"{label:28} {median:8.2f}s {speedup} {statistics.mean(ratios):11.2f}x "
              f"{max(ratios):10.2f}x {over:13.1f}   runs: " + ", ".join(f"{value:.2f}" for value in times[label]))


def adds(args, postgres):
    results = {}
    daemons = []
    work = tempfile.mkdtemp(dir=args.work, prefix="adds-")
    try:
        fleet = Node(args.downpour, "pg", postgres.database("adds"), work, f"{work}/dl-pg")
        sqlite = Node(args.downpour, "sqlite", None, work, f"{work}/dl-sqlite")
        fleet.start()
        sqlite.start()
        aria2_port = free_port()
        aria2 = subprocess.Popen(
            ["aria2c", "--enable-rpc", f"--rpc-listen-port={aria2_port}", f"--dir={work}/dl-aria2",
             "--max-download-result=100000", "--no-conf", "--quiet"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def aria2_up():
            try:
                call(aria2_port, "aria2.getVersion")
                return True
            except OSError:
                return False

        wait_for("aria2c", aria2_up, limit=30)
        daemons = [("downpour, PostgreSQL", fleet.port, fleet), ("downpour, SQLite", sqlite.port, sqlite),
                   ("aria2c", aria2_port, aria2)]
        batches = [[{"methodName": "aria2.addUri",
                     "params": [[f"http://127.0.0.1:9/{batch}-{index}.bin"], {"pause": "true"}]}
                    for index in range(100)] for batch in range(args.adds // 100)]
        for label, port, _ in daemons:
            connection = Connection(port)
            started = time.perf_counter()
            for batch in batches:
                connection.call("system.multicall", batch)
            results[label] = {"adds_s": time.perf_counter() - started}
            note(f"adds: {label}: {results[label]['adds_s']:.2f} s")
        for label, port, process in daemons:
            connection = Connection(port)
            gids = [entry["gid"] for entry in connection.call("aria2.tellWaiting", 0, args.adds, ["gid"])[0]]
            assert len(gids) == args.adds, f"{label}: {len(gids)} waiting"
            waiting = [connection.call("aria2.tellWaiting", 0, 1000)[1] for _ in range(50)]
            status = [connection.call("aria2.tellStatus", random.choice(gids))[1] for _ in range(2000)]
            pid = process.process.pid if isinstance(process, Node) else process.pid
            with open(f"/proc/{pid}/status") as file:
                rss = next(int(line.split()[1]) for line in file if line.startswith("VmRSS:"))
            results[label].update(
                waiting_p50_ms=1000 * percentile(waiting, 0.5), waiting_p99_ms=1000 * percentile(waiting, 0.99),
                status_p50_ms=1000 * percentile(status, 0.5), status_p99_ms=1000 * percentile(status, 0.99),
                rss_mib=rss / 1024)
    finally:
        for label, _, process in daemons:
            if isinstance(process, Node):
                process.stop()
            else:
                process.terminate()
                process.wait(timeout=10)
    print(f"\nadds: {args.adds} addUri (paused, multicall batches of 100), then with them waiting: "
          "tellWaiting(0, 1000) x 50, tellStatus x 2000")
    columns = ["adds_s", "waiting_p50_ms", "waiting_p99_ms", "status_p50_ms", "status_p99_ms", "rss_mib"]
    print(f"{'':22}" + "".join(f"{column:>16}" for column in columns))
    for label, values in results.items():
        print(f"{label:22}" + "".join(f"{values[column]:16.2f}" for column in columns))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--downpour", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--files", type=int, default=36)
    parser.add_argument("--size", type=int, default=6_000_000)
    parser.add_argument("--cap", default="8M")
    parser.add_argument("--adds", type=int, default=10000)
    parser.add_argument("--cases", default="scale,adds")
    parser.add_argument("--rows", default="one,three,kill,kills,database",
                        help="the scale case's rows: one, three, kill, kills, database (default all)")
    parser.add_argument("--database-at", type=float, default=1 / 3,
                        help="when the database restarts, as a fraction of the expected run (default 1/3)")
    parser.add_argument("--node-arg", action="append", default=[],
                        help="one more argument for every node in the scale case (--node-arg=--journal-interval=0.25)")
    args = parser.parse_args()
    args.downpour = os.path.abspath(args.downpour)
    os.makedirs(args.work, exist_ok=True)
    args.work = tempfile.mkdtemp(dir=args.work, prefix="fleet-")
    os.chmod(args.work, 0o755)
    pg_dir = f"{args.work}/pg"
    os.makedirs(pg_dir)
    postgres = Postgres(pg_dir)
    try:
        if "scale" in args.cases:
            scale(args, postgres)
        if "adds" in args.cases:
            adds(args, postgres)
    finally:
        postgres.stop()
        shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
