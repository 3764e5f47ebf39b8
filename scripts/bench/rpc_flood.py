#!/usr/bin/env python3
"""Connection floods against an RPC daemon before any secret is checked: Downpour's and aria2c's RSS side by side.

Each daemon runs with a secret, so nothing the flood sends is ever authorised; what it costs the daemon is memory held
for connections and bytes that arrive before the token could be checked. Floods (each against a fresh daemon, one
daemon at a time, alternating which goes first):
  idle           2,000 connections that send nothing
  halfsent-head  2,000 connections that send `POST /jsonrpc HTTP/1.1`, Host, `Content-Length: 200` and stop mid-headers
  halfsent-body  2,000 connections that send the complete head (Content-Length: 200) and 100 bytes of the body
  announced      300 connections that send a complete head with `Content-Length: 2000000`, then 60 KiB of body
(`halfsent` selects both halfsent variants.) For each daemon and flood, from /proc/PID/status: VmRSS before; the
highest VmRSS sampled while the flood holds (after every connection is open and its bytes sent) and VmHWM at its end;
VmRSS ~2 s and ~5 s after the flood's sockets are closed; how many of the flood's connections the daemon closed by
itself meanwhile (seen from the client: a read that returns b''), and how many sockets the daemon itself has open
(/proc/PID/fd). Growth per connection = (peak VmRSS - VmRSS before) / connections opened, and / connections still open
at the end of the hold.

usage: rpc_flood.py [--downpour BIN] [--aria2c aria2c] [--floods idle,halfsent,announced] [--json out.json]
A daemon whose binary is missing is skipped with a note. Only 127.0.0.1 is used; every connect and wait has a deadline,
the whole run has one (--time-limit), and the daemons are killed on exit (also on Ctrl-C, SIGTERM, and by the kernel
when this script dies: PR_SET_PDEATHSIG).
"""
import argparse
import atexit
import ctypes
import http.client
import json
import os
import resource
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from deps import find_binary

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from ports import free_port  # noqa: E402

DAEMONS = ("downpour", "aria2c")
ALL_FLOODS = ("idle", "halfsent-head", "halfsent-body", "announced")
RUNNING = []  # daemons started and not yet reaped, for the exit handlers


class Stopped(Exception):
    """A signal or --time-limit ends the run; .status is the exit status."""

    def __init__(self, why, status):
        super().__init__(why)
        self.status = status


# --- limits and processes -------------------------------------------------------------------------------------------

def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def daemon_preexec():
    raise_fd_limit()
    try:  # the kernel kills the daemon if this script dies without cleaning up (Linux)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def stop(process):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    if process in RUNNING:
        RUNNING.remove(process)


def stop_all():
    for process in list(RUNNING):
        try:
            stop(process)
        except Exception:
            try:
                process.kill()
            except Exception:
                pass


def proc_status(pid):
    values = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM", "Threads"):
                    values[key] = int(rest.split()[0])
    except OSError:
        pass
    return values


def socket_fds(pid):
    count = 0
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    count += 1
            except OSError:
                pass
    except OSError:
        return None
    return count


def get_version(port, secret, timeout=5):
    body = json.dumps({"jsonrpc": "2.0", "id": "v", "method": "aria2.getVersion", "params": [f"token:{secret}"]})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", "/jsonrpc", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        if r.status != 200 or b'"result"' not in data:
            raise RuntimeError(f"getVersion answered {r.status}: {data[:200]!r}")
        return json.loads(data)["result"].get("version")
    finally:
        c.close()


def start_daemon(name, binary, work, deadline):
    """Starts one daemon in its own directory under work; returns (process, port, secret, version)."""
    port = free_port()
    secret = secrets.token_hex(16)
    os.makedirs(f"{work}/dl")
    os.makedirs(f"{work}/home")
    env = dict(os.environ, HOME=f"{work}/home", XDG_STATE_HOME=f"{work}/xdg-state",
               XDG_CONFIG_HOME=f"{work}/xdg-config", XDG_CACHE_HOME=f"{work}/xdg-cache")
    if name == "downpour":
        command = [binary, "daemon", f"--rpc-listen-port={port}", f"--rpc-secret={secret}", f"--dir={work}/dl",
                   "--no-conf", f"--state-dir={work}/state"]
    else:
        command = [binary, "--enable-rpc", "--no-conf", f"--rpc-listen-port={port}", f"--rpc-secret={secret}",
                   f"--dir={work}/dl"]
    log = open(f"{work}/daemon.log", "wb")
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                               cwd=work, preexec_fn=daemon_preexec, start_new_session=True)
    log.close()
    RUNNING.append(process)
    end = time.monotonic() + deadline
    last = None
    while time.monotonic() < end:
        if process.poll() is not None:
            break
        try:
            return process, port, secret, get_version(port, secret, timeout=min(5, max(0.5, end - time.monotonic())))
        except (OSError, RuntimeError, ValueError, http.client.HTTPException) as e:
            last = e
            time.sleep(0.1)
    stop(process)
    with open(f"{work}/daemon.log", "rb") as f:
        tail = f.read()[-600:].decode(errors="replace")
    raise RuntimeError(f"{name} did not answer aria2.getVersion within {deadline:.0f} s "
                       f"(exit {process.returncode}, last error {last!r}); its output ends: {tail.strip()!r}")


# --- floods ---------------------------------------------------------------------------------------------------------

def flood_spec(name, port, args):
    head = f"POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
    if name == "idle":
        return args.connections, b""
    if name == "halfsent-head":
        return args.connections, (head + "Content-Length: 200\r\n").encode()
    if name == "halfsent-body":
        body = b'{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":["token:' + b"x" * 100
        return args.connections, (head + "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n").encode() \
            + body[:100]
    if name == "announced":
        size = args.announced_body
        body = b'{"jsonrpc":"2.0","id":1,"method":"aria2.addUri","params":["token:' + b"x" * size
        return args.announced_connections, \
            (head + f"Content-Type: application/json\r\nContent-Length: {args.announced_length}\r\n\r\n").encode() \
            + body[:size]
    raise ValueError(name)


def open_flood(port, count, payload, connect_timeout, total_timeout, parallel=256):
    """Opens count connections to 127.0.0.1:port, at most `parallel` connecting at once, and sends payload on each.
    Returns (sockets fully sent, counters). A connection that does not connect within connect_timeout is given up;
    one whose payload is not all sent by then is kept, counted as partial."""
    selector = selectors.DefaultSelector()
    pending = {}  # fd -> [socket, connected, offset, started]
    done, partial = [], []
    failed = {"refused_or_reset": 0, "connect_timeout": 0, "other": 0}
    created = 0
    end = time.monotonic() + total_timeout
    try:
        while (created < count or pending) and time.monotonic() < end:
            while created < count and len(pending) < parallel:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                created += 1
                err = s.connect_ex(("127.0.0.1", port))
                if err not in (0, 115):  # EINPROGRESS
                    failed["refused_or_reset" if err in (104, 111) else "other"] += 1
                    s.close()
                    continue
                pending[s.fileno()] = [s, False, 0, time.monotonic()]
                selector.register(s, selectors.EVENT_WRITE)
            for key, _ in selector.select(timeout=0.05):
                entry = pending[key.fd]
                s = entry[0]
                if not entry[1]:
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        failed["refused_or_reset" if err in (104, 111) else "other"] += 1
                        selector.unregister(s)
                        del pending[key.fd]
                        s.close()
                        continue
                    entry[1] = True
                try:
                    while entry[2] < len(payload):
                        entry[2] += s.send(payload[entry[2]:])
                except BlockingIOError:
                    continue
                except OSError:
                    failed["refused_or_reset"] += 1
                    selector.unregister(s)
                    del pending[key.fd]
                    s.close()
                    continue
                selector.unregister(s)
                del pending[key.fd]
                done.append(s)
            now = time.monotonic()
            for fd, entry in list(pending.items()):
                if now - entry[3] > connect_timeout:
                    s = entry[0]
                    selector.unregister(s)
                    del pending[fd]
                    if entry[1]:
                        partial.append(s)
                    else:
                        failed["connect_timeout"] += 1
                        s.close()
        for fd, entry in list(pending.items()):  # the total deadline passed
            selector.unregister(entry[0])
            if entry[1]:
                partial.append(entry[0])
            else:
                failed["connect_timeout"] += 1
                entry[0].close()
        not_started = count - created
    finally:
        selector.close()
    return done + partial, {"opened": len(done) + len(partial), "fully_sent": len(done),
                            "partially_sent": len(partial), "not_attempted": not_started, **failed}


def still_open(sockets):
    """Splits sockets into (open, closed by the daemon, answered). A socket on which the daemon wrote something (an
    error reply) is drained and counted as answered; it is closed if the daemon closed it after the reply."""
    alive, closed, answered = [], 0, 0
    for s in sockets:
        try:
            data = s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            if data:
                answered += 1
                while True:  # drain the reply, then see whether the close follows it
                    data = s.recv(65536, socket.MSG_DONTWAIT)
                    if not data:
                        break
            if data == b"":
                closed += 1
                s.close()
                continue
            alive.append(s)
        except BlockingIOError:
            alive.append(s)
        except OSError:  # reset
            closed += 1
            s.close()
    return alive, closed, answered


def measure(name, binary, flood, args, root):
    work = tempfile.mkdtemp(prefix=f"{name}-{flood}-", dir=root)
    process, port, secret, version = start_daemon(name, binary, work, args.start_deadline)
    sockets = []
    try:
        pid = process.pid
        for _ in range(5):
            get_version(port, secret)
        time.sleep(args.settle)
        before = proc_status(pid)
        socks_before = socket_fds(pid)
        count, payload = flood_spec(flood, port, args)
        started = time.monotonic()
        sockets, counters = open_flood(port, count, payload, args.connect_timeout,
                                       max(args.connect_timeout, args.flood_timeout))
        open_seconds = time.monotonic() - started
        opened = len(sockets)
        peak_rss, samples = 0, 0
        hold_end = time.monotonic() + args.hold
        while True:
            st = proc_status(pid)
            peak_rss = max(peak_rss, st.get("VmRSS", 0))
            samples += 1
            if time.monotonic() >= hold_end:
                break
            time.sleep(0.05)
        at_peak = proc_status(pid)
        daemon_socks_peak = socket_fds(pid)
        sockets, closed_by_daemon, answered = still_open(sockets)
        held = len(sockets)
        alive_after_flood = process.poll() is None
        responsive = None
        if alive_after_flood:
            try:
                get_version(port, secret, timeout=5)
                responsive = True
            except (OSError, RuntimeError, ValueError, http.client.HTTPException):
                responsive = False
        for s in sockets:
            s.close()
        sockets = []
        closed_at = time.monotonic()
        after = {}
        for wait in args.after:
            time.sleep(max(0.0, closed_at + wait - time.monotonic()))
            after[f"{wait:g}s"] = {"VmRSS": proc_status(pid).get("VmRSS"), "sockets": socket_fds(pid)}
        base = before.get("VmRSS", 0)
        return {
            "flood": flood, "daemon": name, "version": version, "pid": pid,
            "connections": count, "payload_bytes": len(payload), **counters, "open_seconds": round(open_seconds, 3),
            "held_at_peak": held, "closed_by_daemon": closed_by_daemon, "answered_by_daemon": answered,
            "daemon_sockets_before": socks_before, "daemon_sockets_at_peak": daemon_socks_peak,
            "rss_before_kib": base, "hwm_before_kib": before.get("VmHWM"), "threads_before": before.get("Threads"),
            "rss_peak_kib": peak_rss, "rss_samples": samples, "hwm_at_peak_kib": at_peak.get("VmHWM"),
            "threads_at_peak": at_peak.get("Threads"),
            "rss_after_kib": {k: v["VmRSS"] for k, v in after.items()},
            "daemon_sockets_after": {k: v["sockets"] for k, v in after.items()},
            "kib_per_opened": (peak_rss - base) / opened if opened else None,
            "kib_per_held": (peak_rss - base) / held if held else None,
            "daemon_alive": process.poll() is None, "answered_getversion_under_flood": responsive,
        }
    finally:
        for s in sockets:
            s.close()
        stop(process)


# --- report ---------------------------------------------------------------------------------------------------------

def fmt(value, spec=".0f"):
    return "-" if value is None else format(value, spec)


def ratio(a, b, floor=0.5):
    """a / b, or None when b is too small for the quotient to mean anything (noise of a few pages)."""
    if a is None or b is None or b < floor:
        return None
    return a / b


def report(results, after_keys):
    print()
    print("RSS in MiB (VmRSS); growth per connection in KiB = (peak - before) / connections opened [/ held at peak]")
    after_cols = " ".join(f"{'after ' + k:>9}" for k in after_keys)
    header = (f"{'flood':14} {'daemon':9} {'opened':>6} {'held':>5} {'closed':>6} {'socks':>5} "
              f"{'before':>7} {'peak':>7} {'HWM':>7} {after_cols} {'KiB/opened':>10} {'KiB/held':>9}")
    print(header)
    print("-" * len(header))
    mib = lambda kib: None if kib is None else kib / 1024  # noqa: E731
    for r in results:
        if "error" in r:
            print(f"{r['flood']:14} {r['daemon']:9} error: {r['error']}")
            continue
        after = " ".join(f"{fmt(mib(r['rss_after_kib'].get(k)), '.1f'):>9}" for k in after_keys)
        print(f"{r['flood']:14} {r['daemon']:9} {r['opened']:>6} {r['held_at_peak']:>5} {r['closed_by_daemon']:>6} "
              f"{fmt(r['daemon_sockets_at_peak'], 'd'):>5} {fmt(mib(r['rss_before_kib']), '.1f'):>7} "
              f"{fmt(mib(r['rss_peak_kib']), '.1f'):>7} {fmt(mib(r['hwm_at_peak_kib']), '.1f'):>7} {after} "
              f"{fmt(r['kib_per_opened'], '.2f'):>10} {fmt(r['kib_per_held'], '.2f'):>9}")
    print("(held: flood connections still open from the client side at the end of the hold; closed: closed by the "
          "daemon by then; socks: sockets the daemon had open then, /proc/PID/fd, listener included)")
    ratios = {}
    floods = []
    for r in results:
        if r["flood"] not in floods:
            floods.append(r["flood"])
    lines = []
    for flood in floods:
        by = {r["daemon"]: r for r in results if r["flood"] == flood and "error" not in r}
        if "downpour" in by and "aria2c" in by:
            d, a = by["downpour"], by["aria2c"]
            ro, rh = ratio(d["kib_per_opened"], a["kib_per_opened"]), ratio(d["kib_per_held"], a["kib_per_held"])
            ratios[flood] = {"per_opened": ro, "per_held": rh}
            lines.append(f"  {flood:14} per opened {fmt(ro, '.2f'):>6}   per held {fmt(rh, '.2f'):>6}"
                         + ("   (aria2c's growth under 0.5 KiB/connection: no ratio)" if ro is None or rh is None
                            else ""))
    if lines:
        print("\ndownpour/aria2c, growth per connection:")
        print("\n".join(lines))
    for r in results:
        if "error" in r:
            continue
        notes = []
        if r["opened"] < r["connections"]:
            notes.append(f"only {r['opened']} of {r['connections']} connections opened "
                         f"(refused/reset {r['refused_or_reset']}, connect timeouts {r['connect_timeout']}, "
                         f"other {r['other']}, not attempted {r['not_attempted']})")
        if r["partially_sent"]:
            notes.append(f"{r['partially_sent']} connections did not take all {r['payload_bytes']} bytes in time")
        if r["answered_by_daemon"]:
            notes.append(f"{r['answered_by_daemon']} connections got a reply from the daemon")
        if not r["daemon_alive"]:
            notes.append("the daemon exited during the flood")
        elif r["answered_getversion_under_flood"] is False:
            notes.append("the daemon did not answer aria2.getVersion at the end of the hold")
        for n in notes:
            print(f"note: {r['flood']} / {r['daemon']}: {n}")
    return ratios


# --- main -----------------------------------------------------------------------------------------------------------

def parse_floods(text):
    floods = []
    for word in text.split(","):
        word = word.strip()
        names = ["halfsent-head", "halfsent-body"] if word == "halfsent" else [word]
        for n in names:
            if n not in ALL_FLOODS:
                raise argparse.ArgumentTypeError(f"unknown flood {word!r} (idle, halfsent, halfsent-head, "
                                                 f"halfsent-body, announced)")
            if n not in floods:
                floods.append(n)
    return floods


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--downpour", help="the downpour binary (e.g. .build/release/downpour); skipped if missing")
    parser.add_argument("--aria2c", default="aria2c", help="aria2c (default: from PATH); skipped if missing")
    parser.add_argument("--floods", type=parse_floods, default=list(ALL_FLOODS),
                        help="comma-separated: idle, halfsent (= halfsent-head,halfsent-body), halfsent-head, "
                             "halfsent-body, announced (default: all)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--connections", type=int, default=2000, help="connections of idle and halfsent-*")
    parser.add_argument("--announced-connections", type=int, default=300)
    parser.add_argument("--announced-length", type=int, default=2_000_000, help="Content-Length announced")
    parser.add_argument("--announced-body", type=int, default=60 * 1024, help="body bytes sent of it")
    parser.add_argument("--hold", type=float, default=2.5, help="seconds the flood holds while RSS is sampled")
    parser.add_argument("--after", default="2,5", help="seconds after closing the flood's sockets to sample RSS")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds between start-up and the 'before' sample")
    parser.add_argument("--connect-timeout", type=float, default=10.0, help="deadline of one connect (and its send)")
    parser.add_argument("--flood-timeout", type=float, default=60.0, help="deadline of opening one whole flood")
    parser.add_argument("--start-deadline", type=float, default=30.0, help="deadline for a daemon to answer")
    parser.add_argument("--time-limit", type=float, default=900.0, help="the whole run stops after this (seconds)")
    args = parser.parse_args()
    args.after = sorted(float(x) for x in args.after.split(",") if x.strip())

    notes = []
    binaries = {}
    for name, given in (("downpour", args.downpour), ("aria2c", args.aria2c)):
        found = find_binary(given)
        if found:
            binaries[name] = found
        else:
            note = (f"{name}: skipped (no --downpour given)" if name == "downpour" and not given
                    else f"{name}: skipped ({given!r} not found or not executable)")
            notes.append(note)
            print(f"note: {note}", file=sys.stderr)
    if not binaries:
        print("rpc_flood: neither daemon found; nothing to run", file=sys.stderr)
        return 2

    soft = raise_fd_limit()
    needed = max(args.connections if any(f != "announced" for f in args.floods) else 0,
                 args.announced_connections if "announced" in args.floods else 0) + 64
    if soft != resource.RLIM_INFINITY and soft < needed:
        note = (f"RLIMIT_NOFILE is {soft} even raised to the hard limit; a flood needs about {needed} descriptors "
                f"(raise the hard limit, e.g. `ulimit -Hn {needed * 2}` as root, or lower --connections)")
        notes.append(note)
        print(f"warning: {note}", file=sys.stderr)

    def on_signal(signum, frame):
        raise Stopped(f"{signal.Signals(signum).name} received", 128 + signum)

    def on_alarm(signum, frame):
        raise Stopped(f"the whole run passed --time-limit {args.time_limit:.0f} s", 3)

    signal.signal(signal.SIGINT, on_signal)  # also when started with SIGINT ignored (a background job)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, args.time_limit)
    atexit.register(stop_all)

    root = tempfile.mkdtemp(prefix="downpour-rpc-flood-")
    results = []
    status = 0
    names = [n for n in DAEMONS if n in binaries]
    print(f"rpc_flood: {', '.join(f'{n} {binaries[n]}' for n in names)}; floods {', '.join(args.floods)}; "
          f"fd limit {soft}", file=sys.stderr)
    try:
        for i, flood in enumerate(args.floods):
            order = names if i % 2 == 0 else names[::-1]
            for name in order:
                print(f"rpc_flood: {flood} against {name} ...", file=sys.stderr, flush=True)
                try:
                    r = measure(name, binaries[name], flood, args, root)
                except (RuntimeError, OSError) as e:
                    r = {"flood": flood, "daemon": name, "error": str(e)}
                    status = 1
                    print(f"rpc_flood: {flood} / {name}: {e}", file=sys.stderr)
                else:
                    print(f"rpc_flood:   opened {r['opened']}, held {r['held_at_peak']}, closed by daemon "
                          f"{r['closed_by_daemon']}, RSS {r['rss_before_kib']} -> {r['rss_peak_kib']} KiB",
                          file=sys.stderr)
                results.append(r)
    except (KeyboardInterrupt, Stopped) as e:
        status = e.status if isinstance(e, Stopped) else 130
        why = str(e) if isinstance(e, Stopped) else "SIGINT received"
        notes.append(f"stopped early: {why}")
        print(f"rpc_flood: stopped early: {why}; partial results follow", file=sys.stderr)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        stop_all()
        shutil.rmtree(root, ignore_errors=True)

    ratios = report(results, [f"{w:g}s" for w in args.after])
    for n in notes:
        print(f"note: {n}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"binaries": binaries, "floods": args.floods, "fd_limit": soft, "notes": notes,
                       "settings": {k: getattr(args, k) for k in ("connections", "announced_connections",
                                                                  "announced_length", "announced_body", "hold",
                                                                  "after", "settle")},
                       "results": results, "ratios_downpour_over_aria2c": ratios}, f, indent=2)
    return status


if __name__ == "__main__":
    sys.exit(main())
