#!/usr/bin/env python3
"""The benchmark's driver: the downpour CLI against aria2c, curl and wget2 (and the daemon against aria2c's),
downloading from a real nginx it starts on 127.0.0.1 (and, for `lossy`, inside two network namespaces). The cases
are in cases.py; scripts/bench/bench.sh is the entry point. Raw runs go to the CSV, progress to stderr, the summary
(summarize.py) to stdout. See Benchmarks/README.md. Stdlib only."""

import sys

sys.dont_write_bytecode = True

import argparse  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402

import clients  # noqa: E402
import deps  # noqa: E402
import measure  # noqa: E402
import server  # noqa: E402
from cases import BY_NAME, CASES, FAMILIES, LINK, SERVER, DataFile, FileSet  # noqa: E402
from lossy import LossyLink, Skip  # noqa: E402
from payloads import Payloads, digest, human  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# The helper scripts' own options, given through ours (e.g. --rpc-bench-arg=--adds=1000).
HELPER_ARG_OPTIONS = {
    "rpc_bench.py": "rpc_bench_arg", "stall_bench.py": "stall_bench_arg", "fleet_bench.py": "fleet_bench_arg",
    "rpc_flood.py": "rpc_flood_arg", "dead_bench.py": "dead_bench_arg",
    "bytes_bench.py": "bytes_bench_arg", "hls_bench.py": "hls_bench_arg",
}


CLIENT_LINES = """\
clients: downpour get URL -o F -x N --quiet --overwrite; aria2c -x N -s N -k 1M --file-allocation=none (no conf);
         curl -sS -f -o F; wget2 -q --max-threads=1 --no-http2 --no-compression --no-xattr --no-config -O F"""
LIST_LINES = """\
lists:   downpour get -i LIST -j N -d DIR -x 1 [--max-overall-download-limit 20M] --quiet; \
aria2c -i LIST -j N -d DIR -x 1 -s 1 (same options);
         curl --parallel --parallel-max N -sS -f --config F (url/output pairs); \
per-download limit: --max-download-limit 10M on the -x 4 rows"""
CHECKSUM_LINE = ("checksum: the -x 4 rows above plus --checksum=sha-256=HEX or --checksum=sha-512=HEX "
                 "(aria2c: sha-256 only)")
UNITS_LINE = ("units:   MB = 10^6 bytes; median over successful runs; CPU = user+sys of the client; "
              "peak RSS = max over runs")


def note(message):
    print(f"bench: {message}", file=sys.stderr, flush=True)


def die(message):
    note(message)
    sys.exit(2)


def positive_number(text):
    if not re.fullmatch(r"[0-9]+\.?[0-9]*|\.[0-9]+", text):
        raise argparse.ArgumentTypeError(f"not a number: {text}")
    return float(text)


def parse_args():
    settings = {**SERVER.template_values(), **LINK.template_values()}
    lines = [f"  {c.name:<12} {c.about.format(**settings)}{'' if c.default else ' (only when listed)'}"
             for c in CASES if not c.family]
    lines += [f"  {f:<12} {' '.join(names)} (only when listed; each also by its name)"
              for f, names in FAMILIES.items()]
    parser = argparse.ArgumentParser(
        prog="scripts/bench/bench.sh", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Benchmark: downpour against aria2c, curl and wget2 on a private nginx (see "
                    "Benchmarks/README.md).",
        epilog="cases (scripts/bench/cases.py):\n" + "\n".join(lines))
    parser.add_argument("--binary", metavar="PATH", help="the downpour to test (default: swift build -c release, then "
                                         ".build/release/downpour)")
    parser.add_argument("--reps", type=int, metavar="N", default=3,
                        help="repetitions (default 3); tables show medians")
    parser.add_argument("--cases", metavar="LIST", default=",".join(c.name for c in CASES if c.default),
                        help="comma-separated, run in the order given (default: %(default)s)")
    parser.add_argument("--size-scale", type=positive_number, metavar="F", default=1.0,
                        help="multiply every file size (at least 1 MiB; not the 64 KiB files of manyfiles)")
    parser.add_argument("--csv", metavar="FILE", default="bench-results.csv",
                        help="every run, raw (default ./%(default)s)")
    parser.add_argument("--run-timeout", type=int, metavar="S",
                        help="seconds for one client run instead of the case's own")
    parser.add_argument("--lossy-cc", metavar="ALGO",
                        help="TCP congestion control inside the lossy namespaces (e.g. cubic)")
    parser.add_argument("--settle", type=positive_number, metavar="S", default=1.0,
                        help="seconds to wait after the sync before every run (default 1)")
    parser.add_argument("--floor", metavar="PATH",
                        help="Benchmarks/TransportFloor's binary: two more rows in manyfiles")
    parser.add_argument("--install-deps", action="store_true",
                        help="install missing tools with apt-get (otherwise a missing tool is an error)")
    parser.add_argument("--rpc-bench-arg", action="append", metavar="ARG", default=[],
                        help="one more argument for rpc_bench.py in the daemon case (--rpc-bench-arg=--adds=1000)")
    parser.add_argument("--stall-bench-arg", action="append", metavar="ARG", default=[],
                        help="one more argument for stall_bench.py in the stalled case")
    parser.add_argument("--fleet-bench-arg", action="append", metavar="ARG", default=[],
                        help="one more argument for fleet_bench.py in the fleet case")
    parser.add_argument("--rpc-flood-arg", action="append", metavar="ARG", default=[],
                        help="one more argument for rpc_flood.py in the floods case")
    parser.add_argument("--dead-bench-arg", action="append", metavar="ARG", default=[],
                        help="one more argument for dead_bench.py in the dead case (--dead-bench-arg=--urls=200)")
    parser.add_argument("--bytes-bench-arg", action="append", metavar="ARG", default=[],
                        help="one more argument for bytes_bench.py in the bytes case")
    parser.add_argument("--hls-bench-arg", action="append", metavar="ARG", default=[],
                        help="one more argument for hls_bench.py in the hls case (--hls-bench-arg=--seconds=30)")
    args = parser.parse_args()
    if args.reps < 1:
        die(f"--reps must be a positive integer: {args.reps}")
    if args.size_scale <= 0:
        die(f"--size-scale must be a positive number: {args.size_scale}")
    if args.run_timeout is not None and args.run_timeout < 1:
        die(f"--run-timeout must be whole seconds: {args.run_timeout}")
    if args.lossy_cc and not re.fullmatch(r"[a-z0-9_]+", args.lossy_cc):
        die(f"--lossy-cc: bad algorithm name: {args.lossy_cc}")
    names = [n for c in args.cases.split(",") if c for n in FAMILIES.get(c, (c,))]
    for name in names:
        if name not in BY_NAME:
            die(f"unknown case: {name} (known: {' '.join(n for n, c in BY_NAME.items() if not c.family)} "
                f"{' '.join(FAMILIES)})")
        if names.count(name) > 1:
            die(f"case listed twice: {name}")
    if not names:
        die("--cases is empty")
    args.selected = [BY_NAME[n] for n in names]
    return args


def needed_commands(selected):
    needed = {"nginx"}
    for case in selected:
        needed.update(case.tools)
        if case.rows:
            needed.update(("timeout", "/usr/bin/time"))
        for row in case.rows:
            needed.update(clients.NEEDS[row.tool])
        if case.lossy:
            needed.update(("ip", "tc", "curl"))  # curl: the link's checks from the client namespace
    return needed


def executable(path, what):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        die(f"{what}: not found or not executable: {path}")
    return os.path.abspath(path)


def binary_of(args):
    if args.binary:
        return executable(args.binary, "binary")
    if shutil.which("swift") is None:
        die("swift not found; build elsewhere and pass --binary PATH")
    note(f"building: swift build -c release --product downpour (in {REPO})")
    if subprocess.run(["swift", "build", "-c", "release", "--product", "downpour"], cwd=REPO,
                      stdin=subprocess.DEVNULL, stdout=sys.stderr).returncode != 0:
        die("release build failed")
    return executable(os.path.join(REPO, ".build/release/downpour"), "binary")


def first_line(argv):
    try:
        result = subprocess.run(argv, capture_output=True, text=True)
    except OSError:
        return "(not installed)"
    lines = (result.stdout or result.stderr).splitlines()
    return lines[0] if lines else "?"


def read(path, default="?"):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


class Bench:
    def __init__(self, args, binary, floor, work):
        self.args, self.binary, self.floor, self.work = args, binary, floor, work
        self.www, self.out = os.path.join(work, "www"), os.path.join(work, "out")
        for d in (self.www, self.out):
            os.makedirs(d)
        self.csv = os.path.abspath(args.csv)
        try:
            measure.prepare_csv(self.csv)
            open(self.csv + ".timeline", "w").close()
        except OSError as e:
            die(f"cannot write {self.csv}: {e.strerror}")
        self.nginx_binary = server.find_nginx()
        self.stub_status = server.has_stub_status(self.nginx_binary)
        self.nginx = server.Nginx(self.nginx_binary, work, self.www, self.stub_status, note)
        self.link = None
        self.failed = []

    def start(self):
        port = self.nginx.start_on_free_port()
        self.base, self.mirror_base = f"http://127.0.0.1:{port}", f"http://127.0.0.2:{port + 1}"
        self.payloads = Payloads(self.www, self.work, self.out, self.base, self.args.size_scale)

    def stop(self):
        if self.link is not None:
            self.link.down()
        self.nginx.stop()

    def values(self, payload):
        """Template values for a row or a case that downloads `payload`."""
        if payload is None:
            return {}
        v = self.payloads.values(payload)
        return {**v, "size_h": human(v["size"])}

    def context(self, case):
        ctx = {**SERVER.template_values(), **case.link.template_values(), "base": self.base,
               "mirror_base": self.mirror_base, "binary": self.binary, "work": self.work,
               "settle": f"{self.args.settle:g}", "reps": self.args.reps}
        for row in case.rows:
            if isinstance(row.payload, FileSet):
                v = self.values(row.payload)
                ctx.update(count=v["count"], each=v["each"], each_h=v["each_h"])
        ctx.update(self.values(case.payload))
        sizes = [self.payloads.size(r.payload or case.payload) for r in case.rows
                 if isinstance(r.payload or case.payload, DataFile)]
        ctx["sizes_h"] = " vs ".join(human(s) for s in dict.fromkeys(sizes))
        return ctx

    def run_case(self, case):
        note(f"=== case {case.name} ===")
        if case.script:
            self.run_script(case)
        else:
            self.run_rows(case)

    def run_script(self, case):
        ctx = self.context(case)
        helper = case.script[0]
        argv = [sys.executable, os.path.join(HERE, helper), *(a.format(**ctx) for a in case.script[1:]),
                *getattr(self.args, HELPER_ARG_OPTIONS[helper])]
        sys.stdout.flush()
        # SIGINT: the helper's own clean-up (its finally blocks stop its daemons) runs.
        rc = measure.run_to_end(argv, signal.SIGINT)
        if rc != 0:
            note(f"case {case.name}: {helper} exited with {rc}")
            self.failed.append(case.name)

    def run_rows(self, case):
        ctx, netns, base = {}, "", self.base
        if case.lossy:
            self.link = LossyLink(case.link, self.work, self.nginx_binary, self.www, self.stub_status, self.args.lossy_cc, note)
            try:
                self.link.up()
            except Skip as e:
                print(f"\n{case.name}: skipped: {e}", flush=True)
                self.link.down()
                self.link = None
                return
            ctx.update(self.link.describe())
            netns, base = self.link.client_ns, self.link.base
        try:
            ctx.update(self.context(case), base=base)
            rows = [row for row in case.rows if self.floor or not row.needs_floor]
            plan = [self.measurement(case, i, row, ctx, netns) for i, row in enumerate(rows)]
            timeout = self.timeout(case, plan)
            setup = measure.Setup(self.work, self.out, self.csv, self.args.settle, self.nginx, self.base)
            for rep in range(self.args.reps):
                for seq in range(len(plan)):
                    m = plan[(seq + rep) % len(plan) if case.rotate else seq]
                    m = replace(m, rep=rep + 1, seq=seq + 1, timeout_s=timeout)
                    if case.align_stragglers and not server.align_connections(base):
                        note("could not line up nginx connection numbers")
                    kept = os.path.join(self.work, f"kept.{case.name}.{m.rep}.{m.seq}") if case.keep_outputs else ""
                    measure.run(m, setup, case.count_connections, kept)
        finally:
            if self.link is not None:
                self.link.down()
                self.link = None
        self.summarize(case, ctx)

    def measurement(self, case, index, row, ctx, netns):
        payload = row.payload or case.payload
        v = {**ctx, **self.values(payload)}
        if any("{sha512}" in e for e in row.extra):
            v["sha512"] = self.payloads.sha512(payload)
        url = row.url.format(**v)
        many = isinstance(payload, FileSet)
        argv = clients.command(row.tool, row.connections, url, measure.output_path(self.out, many), v["size"],
                               [e.format(**v) for e in row.extra], self.binary, self.floor)
        return measure.Measurement(
            case=case.name, rep=0, reps=self.args.reps, seq=0, index=index, label=row.label.format(**v),
            tool=row.tool, connections=row.connections, role=row.role, url=url, argv=tuple(argv), size=v["size"],
            sha256="" if many else v["sha256"], manifest=v["manifest"] if many else "",
            count=v["count"] if many else 0, limit_bps=row.limit_bps, netns=netns,
            timeline_dev="dpb1" if netns else "", server_ns=self.link.server_ns if netns else "",
            server_log=os.path.join(self.link.dir, "timeline.log") if netns else "")

    def timeout(self, case, plan):
        if self.args.run_timeout:
            return self.args.run_timeout
        t = case.timeout
        if t.fixed:
            return t.fixed
        if t.floor_rate:
            return int(60 + max(m.size for m in plan) / t.floor_rate)
        return round(60 + t.limit_factor * max(m.size / m.limit_bps for m in plan if m.limit_bps))

    def summarize(self, case, ctx):
        sys.stdout.flush()
        measure.run_to_end([sys.executable, os.path.join(HERE, "summarize.py"), "--csv", self.csv, "--case",
                            case.name, "--title", case.title.format(**ctx), *(a.format(**ctx) for a in case.summary),
                            *(("--rtt-ms", str(2 * case.link.delay_ms)) if case.lossy else ())],
                           signal.SIGINT)

    def header(self):
        args, binary = self.args, self.binary
        names = [c.name for c in args.selected]
        git = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", REPO, "diff", "--quiet", "HEAD", "--"], capture_output=True)
        sha = digest(binary)
        # Reading the whole binary leaves it in the page cache in large folios, which the kernel then maps whole
        # around each page fault: the runs' peak RSS would count 2-3 MB of code they never touched (measured:
        # 30.8 MB at -x 8 after eviction, 33.3-33.6 MB after a sha256sum). The peers' binaries are not read; ours is
        # let go again, so every client starts from the page cache as a run of it leaves it.
        try:
            fd = os.open(binary, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        except OSError:
            pass
        mem = next((int(line.split()[1]) for line in read("/proc/meminfo", "").splitlines()
                    if line.startswith("MemTotal:")), 0)
        cc = read("/proc/sys/net/ipv4/tcp_congestion_control")
        print(f"downpour benchmark, {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
        print(f"binary:  {binary} ({git.stdout.strip() or '?'}{', work tree modified' if dirty.returncode else ''})")
        print(f"machine: {os.cpu_count()} cores, {mem / 1048576:.1f} GiB, kernel {os.uname().release}, TCP {cc}")
        print(f"         sha256 {sha[:16]}..., {os.path.getsize(binary)} bytes, built "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(os.path.getmtime(binary)))}")
        wget2 = " ".join(first_line(["wget2", "--version"]).split()[:3])
        print(f"peers:   {first_line(['aria2c', '--version'])}; "
              f"{' '.join(first_line(['curl', '--version']).split()[:2])}; {wget2}")
        nginx_version = first_line([self.nginx_binary, "-v"]).removeprefix("nginx version: ")
        print(f"server:  {nginx_version}, worker_processes auto, sendfile on, at {self.base}")
        print(CLIENT_LINES)
        if "manyfiles" in names or "ratelimit" in names:
            print(LIST_LINES)
        if "checksum" in names:
            print(CHECKSUM_LINE)
        print(f"run:     cases {' '.join(names)}; {args.reps} rep(s); size scale {args.size_scale:g}; settle "
              f"{args.settle:g} s before each run; CSV {self.csv}")
        print(UNITS_LINE)
        print(f"load:    {' '.join(read('/proc/loadavg').split()[:3])} (1/5/15 min) at start", flush=True)

    def run(self):
        self.header()
        selected = self.args.selected
        for i, case in enumerate(selected):
            self.run_case(case)
            later = selected[i + 1:]
            self.payloads.drop_unless([p for c in later for p in [c.payload, *(r.payload for r in c.rows)] if p])
        print()
        print(f"load:    {' '.join(read('/proc/loadavg').split()[:3])} (1/5/15 min) at the end")
        print(f"raw runs: {self.csv}", flush=True)
        if self.failed:
            note(f"failed: {' '.join(self.failed)}")
            return 1
        return 0


def main():
    args = parse_args()
    deps.ensure(needed_commands(args.selected), args.install_deps)
    binary = binary_of(args)
    floor = executable(args.floor, "--floor (build it: swift build -c release --package-path "
                                   "Benchmarks/TransportFloor)") if args.floor else None
    work = tempfile.mkdtemp(prefix="downpour-bench.", dir=os.environ.get("TMPDIR") or "/tmp")
    os.chmod(work, 0o755)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    bench = None
    try:
        bench = Bench(args, binary, floor, work)
        bench.start()
        return bench.run()
    except KeyboardInterrupt:
        return 130
    finally:
        if bench is not None:
            bench.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
