"""One measurement: a client run under `timeout` and /usr/bin/time, its output checked, one CSV row and one progress
line. Stdlib only."""

import bisect
import csv
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import payloads
import server

CSV_HEADER = ("case,rep,seq,client_index,client,tool,connections,role,size_bytes,url,exit_code,status,wall_s,mb_s,"
              "user_s,sys_s,cpu_s,max_rss_kb,sha_ok,limit_bps,log_conns,log_requests,server_s,accepted_conns,"
              "files_ok,first_byte_s,full_speed_s,last_1pct_s,all_asking_s,retrans_segs,rtos,first_10pct_s,sync_s").split(",")
HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE_INTERVAL = 0.002  # seconds between two readings of the received bytes
RATE_WINDOW = 0.1  # seconds over which a rate is taken


@dataclass(frozen=True)
class Measurement:
    """What one run is: where it stands in the case, the row's fields, and what it must produce."""
    case: str
    rep: int
    reps: int
    seq: int  # 1.. within the repetition
    index: int  # the row's place in the case
    label: str
    tool: str
    connections: int
    role: str
    url: str
    argv: tuple  # the client's command, writing to output_path(...)
    size: int  # bytes downloaded (MB/s)
    sha256: str = ""  # the single output file's digest, or
    manifest: str = ""  # a sha256sum manifest the output directory must match exactly
    count: int = 0  # files in the manifest
    limit_bps: int = 0
    timeout_s: int = 120
    netns: str = ""  # run inside this network namespace
    timeline_dev: str = ""  # the device in netns whose received bytes give the run's timeline
    server_ns: str = ""  # over a link: nginx's namespace (its TCP counters), and
    server_log: str = ""  # nginx's timeline.log there (each request's connection and times)


@dataclass(frozen=True)
class Setup:
    """What every measurement of a run shares."""
    work: str
    out: str  # the output file is OUT/download.bin, or OUT itself for a manifest
    csv: str
    settle: float
    nginx: "server.Nginx"  # for conn.log
    base: str  # for /status


def prepare_csv(path):
    with open(path, "w", newline="") as f:
        csv.writer(f).writerow(CSV_HEADER)


def output_path(out_dir, many_files):
    """Where a client writes: the directory itself for many files, else one file in it."""
    return out_dir if many_files else os.path.join(out_dir, "download.bin")


@dataclass
class Result:
    """What one run gave."""
    rc: int = 0
    wall: float = 0.0
    # `sync -f` of the output's file system right after the client: what making its files durable still took
    # (next to nothing for downpour, which syncs each file before naming it).
    sync: "float | None" = None
    user: "float | None" = None
    sys: "float | None" = None
    rss_kb: "int | None" = None
    status: str = ""
    files_ok: "int | None" = None
    conns: "tuple | None" = None  # from conn.log: (connections, requests, server-side span s)
    accepted: "int | None" = None  # nginx's counter
    timeline: "Timeline | None" = None
    connections: "list | None" = None  # over a link: [ServerConnection] from nginx's timeline.log
    tcp: "tuple | None" = None  # over a link: (retransmitted segments, retransmission time-outs) on nginx's side
    server_log_from: "tuple | None" = None  # (offset in m.server_log, time.time() at the client's start)

    @property
    def cpu(self):
        return self.user + self.sys if self.user is not None else None

    @property
    def conn_fields(self):
        return ("%d" % self.conns[0], "%d" % self.conns[1], "%.3f" % self.conns[2]) if self.conns else None


def run(m, setup, count_connections=False, keep_output_as=""):
    """Runs `m` once; appends its CSV row, prints its progress line; returns its status ("ok" or why not). With
    `keep_output_as`, the output directory is moved there instead of deleted."""
    out = output_path(setup.out, bool(m.manifest))
    shutil.rmtree(setup.out, ignore_errors=True)
    os.makedirs(setup.out)
    os.sync()
    time.sleep(setup.settle)
    if count_connections:
        accepted_before, offset = server.accepted_count(setup.base), setup.nginx.conn_log_size()
    result = execute(m, setup.work)
    if result.rc == 0:
        started = time.perf_counter()
        subprocess.run(["sync", "-f", setup.out], check=False)
        result.sync = time.perf_counter() - started
    if count_connections:
        accepted_after = server.accepted_count(setup.base)
        if accepted_before is not None and accepted_after is not None:
            result.accepted = accepted_after - accepted_before - 1  # the reading's own connection is counted too
    result.status, result.files_ok = check(m, result.rc, out)
    # nginx writes a request's log line right after its last byte; the check above has given it time.
    if count_connections:
        result.conns = setup.nginx.conn_log_stats(offset)
    if result.server_log_from:
        result.connections = server_connections(m.server_log, *result.server_log_from)
    record(m, result, setup.csv)
    report(m, result, os.path.join(setup.work, "client.log"))
    if result.timeline or result.connections:
        with open(setup.csv + ".timeline", "a") as f:
            f.write(describe_connections(m, result))
    if keep_output_as:
        os.rename(setup.out, keep_output_as)
    else:
        shutil.rmtree(setup.out, ignore_errors=True)
    os.makedirs(setup.out, exist_ok=True)
    return result.status


def execute(m, work):
    """The client under `timeout` (in m.netns when set) and /usr/bin/time: exit code, wall time, CPU and peak RSS;
    its output goes to WORK/client.log."""
    timef = os.path.join(work, "time.out")
    open(timef, "w").close()
    prefix = ["ip", "netns", "exec", m.netns] if m.netns else []
    sampler = RxSampler(m.netns, m.timeline_dev) if m.timeline_dev else None
    log_offset = os.path.getsize(m.server_log) if m.server_log and os.path.exists(m.server_log) else 0
    tcp_before = tcp_counters(m.server_ns) if m.server_ns else None
    try:
        with open(os.path.join(work, "client.log"), "wb") as log:
            wall_start = time.time()
            t0 = time.perf_counter()
            start = time.monotonic()
            # timeout runs the client in a process group of its own and passes a SIGTERM on to all of it.
            rc = run_to_end([*prefix, "timeout", "-k", "5", str(m.timeout_s), "/usr/bin/time", "-f",
                             "%e %U %S %M", "-o", timef, *m.argv], signal.SIGTERM, stdout=log,
                            stderr=subprocess.STDOUT)
            result = Result(rc=rc, wall=time.perf_counter() - t0)
    finally:
        samples = sampler.stop() if sampler else None
    if samples and rc == 0:
        result.timeline = timeline(samples, start, result.wall)
    if m.server_ns:
        tcp_after = tcp_counters(m.server_ns)
        if tcp_before and tcp_after:
            result.tcp = (tcp_after[0] - tcp_before[0], tcp_after[1] - tcp_before[1])
        result.server_log_from = (log_offset, wall_start)
    try:
        with open(timef) as f:
            elapsed, user, system, rss = f.read().strip().splitlines()[-1].split()
        float(elapsed)
        result.user, result.sys, result.rss_kb = float(user), float(system), int(rss)
    except (OSError, IndexError, ValueError):
        pass  # killed, or the client did not start: no figures
    return result


@dataclass(frozen=True)
class Timeline:
    """When a run's bytes came, from the client namespace's received bytes (the TCP/IP and HTTP overhead
    included), in seconds from the client's start: its first 4 KiB; the first time its rate over RATE_WINDOW
    reached 90 % of its median rate (the median over the windows between the first byte and the last 1 %); how
    long the last 1 % took, up to the client's exit; and when its first 10 % were in (a measure of how soon a
    download gets going that does not depend on its own median, which is higher for a faster client)."""
    first_byte: float
    full_speed: float
    last_1pct: float
    first_10pct: float


def timeline(samples, start, wall):
    """A Timeline from (monotonic, rx bytes) samples, the client's start (monotonic) and its wall time; None when
    too little came to tell."""
    before = [rx for t, rx in samples if t <= start]
    base = before[-1] if before else samples[0][1]
    points = [(t - start, rx - base) for t, rx in samples if t > start]
    if not points or points[-1][1] < 64 * 1024:
        return None
    total = points[-1][1]
    first = next(t for t, n in points if n >= 4096)
    t10 = next(t for t, n in points if n >= 0.1 * total)
    t99 = next(t for t, n in points if n >= 0.99 * total)

    times = [t for t, _ in points]

    def received_at(moment):
        i = bisect.bisect_right(times, moment)
        return points[i - 1][1] if i else 0

    windows, t = [], first
    while t + RATE_WINDOW <= t99:
        windows.append((received_at(t + RATE_WINDOW) - received_at(t)) / RATE_WINDOW)
        t += RATE_WINDOW
    if not windows:
        return Timeline(first, t99, max(0.0, wall - t99), t10)
    target = 0.9 * sorted(windows)[len(windows) // 2]
    full = t99
    for t, n in points:
        if t < first + RATE_WINDOW:
            continue
        if (n - received_at(t - RATE_WINDOW)) / RATE_WINDOW >= target:
            full = t
            break
    return Timeline(first, full, max(0.0, wall - t99), t10)


@dataclass
class ServerConnection:
    """One connection as nginx saw it, times in seconds from the client's start: when it was accepted, and each
    request's (start, end, body bytes sent, Range, status)."""
    serial: int
    accepted: float
    requests: list


def server_connections(path, offset, wall_start):
    """The connections of the requests nginx logged in `path` (the timeline format) after byte `offset`, in the
    order they were accepted."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return []
    by_serial = {}
    for line in lines:
        fields = line.split(" ", 6)
        try:
            serial, end, lived, took = int(fields[0]), float(fields[1]), float(fields[2]), float(fields[3])
            status, sent, ranged = fields[4], int(fields[5]), fields[6].strip('"')
        except (IndexError, ValueError):
            continue
        c = by_serial.setdefault(serial, ServerConnection(serial, end - lived - wall_start, []))
        c.accepted = min(c.accepted, end - lived - wall_start)
        c.requests.append((end - took - wall_start, end - wall_start, sent, ranged, status))
    return sorted(by_serial.values(), key=lambda c: c.accepted)


def all_asking(connections, n):
    """When the n-th connection sent its first request (seconds from the client's start, as nginx read it), or
    None."""
    firsts = sorted(min(r[0] for r in c.requests) for c in connections if c.requests)
    return firsts[n - 1] if len(firsts) >= n else None


def tcp_counters(netns):
    """(retransmitted segments, retransmission time-outs) of the TCP stack of `netns`, or None."""
    result = subprocess.run(["ip", "netns", "exec", netns, "cat", "/proc/net/snmp", "/proc/net/netstat"],
                            capture_output=True, text=True)
    values, header = {}, {}
    for line in result.stdout.splitlines():
        prefix, _, rest = line.partition(":")
        if prefix in header:
            values.update({f"{prefix}.{k}": v for k, v in zip(header.pop(prefix), rest.split())})
        else:
            header[prefix] = rest.split()
    try:
        return int(values["Tcp.RetransSegs"]), int(values["TcpExt.TCPTimeouts"])
    except (KeyError, ValueError):
        return None


def describe_connections(m, r):
    """The run's connections as nginx saw them, one line each, for the timeline file."""
    lines = [f"[{m.case} rep {m.rep} #{m.seq}] {m.label}: {r.wall:.3f} s, {r.status}"
             + (f"; first byte {r.timeline.first_byte:.3f} s, first 10 % {r.timeline.first_10pct:.3f} s, full speed "
                f"{r.timeline.full_speed:.3f} s, last 1 % {r.timeline.last_1pct:.3f} s" if r.timeline else "")
             + (f"; nginx's side: {r.tcp[0]} segments retransmitted, {r.tcp[1]} retransmission time-outs"
                if r.tcp else "")]
    for c in r.connections or []:
        parts = [f"{start:.3f}-{end:.3f} {ranged or '-'} {status} {sent}B"
                 for start, end, sent, ranged, status in c.requests]
        lines.append(f"  conn {c.serial:<6} accepted {c.accepted:7.3f}  " + "; ".join(parts))
    return "\n".join(lines) + "\n"


class RxSampler:
    """rxsampler.py in the client namespace around one run."""

    def __init__(self, netns, device):
        self.process = subprocess.Popen(
            ["ip", "netns", "exec", netns, sys.executable, os.path.join(HERE, "rxsampler.py"), device,
             str(SAMPLE_INTERVAL)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        if self.process.stdout.readline().strip() != "ready":
            self.process.wait()
            raise RuntimeError("rxsampler.py did not start")

    def stop(self):
        """The samples: (monotonic, received bytes)."""
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=30)
        samples = []
        for line in out.splitlines():
            t, rx = line.split()
            samples.append((float(t), int(rx)))
        return samples


def record(m, r, path):
    mbs = m.size / r.wall / 1e6 if r.wall > 0 else None
    row = [m.case, m.rep, m.seq, m.index, m.label, m.tool, m.connections, m.role, m.size, m.url, r.rc, r.status,
           "%.3f" % r.wall, opt("%.1f", mbs), opt("%.2f", r.user), opt("%.2f", r.sys), opt("%.2f", r.cpu),
           opt("%d", r.rss_kb), 1 if r.status == "ok" else 0, m.limit_bps or "", *(r.conn_fields or ("", "", "")),
           opt("%d", r.accepted), opt("%d", r.files_ok),
           *(("%.3f" % r.timeline.first_byte, "%.3f" % r.timeline.full_speed, "%.3f" % r.timeline.last_1pct)
             if r.timeline else ("", "", "")),
           opt("%.3f", all_asking(r.connections, m.connections) if r.connections else None),
           *(("%d" % r.tcp[0], "%d" % r.tcp[1]) if r.tcp else ("", "")),
           opt("%.3f", r.timeline.first_10pct if r.timeline else None), opt("%.3f", r.sync)]
    with open(path, "a", newline="") as f:
        csv.writer(f).writerow(row)


def report(m, r, client_log):
    """The progress line on stderr, and the client's last lines when the run failed."""
    mbs = m.size / r.wall / 1e6 if r.wall > 0 else None
    line = "bench: [%s rep %d/%d #%d] %-22s %8.3f s %8s MB/s  cpu %5s s  rss %6s MB  %s" % (
        m.case, m.rep, m.reps, m.seq, m.label, r.wall, opt("%.1f", mbs), opt("%.2f", r.cpu, "-"),
        opt("%.1f", r.rss_kb * 1024 / 1e6 if r.rss_kb is not None else None, "-"), r.status)
    if r.sync is not None:
        line += "  durable %.3f s" % (r.wall + r.sync)
    if r.timeline:
        line += "  first byte %.3f s, 10%% in %.3f s, full speed %.3f s, last 1%% %.3f s" % (
            r.timeline.first_byte, r.timeline.first_10pct, r.timeline.full_speed, r.timeline.last_1pct)
    if r.connections:
        line += ", %d asking by %s s, %d conns, %d requests" % (
            m.connections, opt("%.3f", all_asking(r.connections, m.connections), "-"), len(r.connections),
            sum(len(c.requests) for c in r.connections))
    if r.tcp:
        line += ", retransmitted %d, RTOs %d" % r.tcp
    if r.conns or r.accepted is not None:
        n, requests, span = r.conn_fields or ("-", "-", "-")
        line += "  conns %s (accepted %s), %s requests, server %s s" % (n, opt("%d", r.accepted, "-"), requests, span)
    print(line, file=sys.stderr, flush=True)
    if r.status != "ok" and os.path.getsize(client_log):
        with open(client_log, errors="replace") as f:
            for text in f.read().splitlines()[-5:]:
                print(f"bench:     | {text}", file=sys.stderr)


def run_to_end(argv, stop_signal, **popen_args):
    """Runs argv and returns its exit code. When this process is interrupted meanwhile (SIGINT, or SIGTERM made an
    exception by run.py), the child gets `stop_signal` and up to 10 s to clean up (then SIGKILL)."""
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, **popen_args)
    try:
        return process.wait()
    except BaseException:
        process.send_signal(stop_signal)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        raise


def check(m, rc, out):
    """(status, files that match the manifest or None)."""
    files_ok = None
    if m.manifest:
        files = sum(len(names) for _, _, names in os.walk(out))
        files_ok = payloads.manifest_matches(out, m.manifest)
    if rc in (124, 137):
        return "TIMEOUT", files_ok
    if rc != 0:
        return f"EXIT{rc}", files_ok
    if m.manifest:
        if files_ok == m.count and files == m.count:
            return "ok", files_ok
        if files == 0:
            return "NO-OUTPUT", files_ok
        if files != m.count:
            return f"FILES-{files}-OF-{m.count}", files_ok
        return f"SHA-MISMATCH-{m.count - files_ok}", files_ok
    if not os.path.isfile(out):
        return "NO-OUTPUT", files_ok
    return ("ok" if payloads.digest(out) == m.sha256 else "SHA-MISMATCH"), files_ok


def opt(form, value, missing=""):
    return missing if value is None else form % value
