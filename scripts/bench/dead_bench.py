#!/usr/bin/env python3
"""Dead links: how fast each client ENDS downloads that cannot succeed. Downpour beside aria2c, curl (and wget2 when
installed), one run each, in three parts:

  refused   1,000 URLs on a loopback port where nothing listens (a socket bound there and never listening keeps the
            port ours, so every connect is refused), as one list, 16 at once:
              downpour get --no-conf -i LIST -j 16 -d DIR --quiet
              aria2c --no-conf -i LIST -j 16 -d DIR --console-log-level=warn --summary-interval=0
              curl -q --parallel --parallel-max 16 -sS -f --config F        (url/output pairs; no retries by default)
              wget2 --no-config -q --max-threads 16 -i LIST -P DIR
  nxdomain  1,000 URLs of unknown hosts (http://h0001.dead.test/f0001.bin ...), the same four commands, run in a
            private mount namespace (unshare --mount) whose /etc/resolv.conf (bind-mounted) names only a resolver
            this script runs on 127.0.0.1:53, which answers every query NXDOMAIN, and whose /etc/nsswitch.conf says
            `hosts: files dns`. Before any client runs, the script checks inside the namespace that those files are
            its own, that /etc/hosts does not name dead.test, and that a lookup of a probe name reached its resolver
            and failed with EAI_NONAME; otherwise the part is skipped with a note. No query leaves loopback.
  daemon    10,000 refused URLs added to `downpour daemon` and to `aria2c --enable-rpc` (each on a free loopback
            port with a secret, in its own temp directory, -j 16, --max-download-result N so every result is kept)
            with aria2.addUri in system.multicall batches of 500; then aria2.getGlobalStat is polled until
            numActive = numWaiting = 0 (deadline --daemon-deadline, else "did not finish"); the stopped results are
            read back with aria2.tellStopped and counted by status.

Reported per part and client: the time from start to exit (daemon: from the first addUri to the poll that saw
nothing left), the exit status (daemon: how many ended, how many in error), ms per URL, and downpour / best peer
(per URL, so a scaled-down part still compares). --daemon-urls N scales the daemon part down for every daemon,
--downpour-daemon-urls N for downpour's only (the scale used is printed).

usage: dead_bench.py --downpour BIN [--aria2c aria2c] [--curl curl] [--wget2 wget2] [--parts refused,nxdomain,daemon]
                     [--urls 1000] [--daemon-urls 10000] [--downpour-daemon-urls N] [--json out.json]
Only loopback is used. Every wait and every subprocess has a deadline, the whole run too (--time-limit); clients and
daemons are killed on exit, on Ctrl-C, SIGTERM and SIGHUP, and by the kernel if this script dies (PR_SET_PDEATHSIG).
Stdlib only; the nxdomain part needs root, unshare and mount (util-linux).
"""
import argparse
import atexit
import ctypes
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from deps import find_binary

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from ports import free_port  # noqa: E402

PARTS = ("refused", "nxdomain", "daemon")
LIST_CLIENTS = ("downpour", "aria2c", "curl", "wget2")
DAEMON_CLIENTS = ("downpour", "aria2c")
# Never passed to a client: proxies would carry the requests elsewhere, the resolver variables change resolv.conf.
SCRUBBED = {"http_proxy", "https_proxy", "HTTPS_PROXY", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy",
            "NO_PROXY", "ftp_proxy", "FTP_PROXY", "RES_OPTIONS", "LOCALDOMAIN", "HOSTALIASES", "CURL_HOME",
            "WGETRC", "CURL_CA_BUNDLE", "LD_PRELOAD"}
RUNNING = {}  # pid -> (Popen, seconds of grace after SIGTERM; 0: SIGKILL at once)
DNS_FALLBACK_ADDRESSES = ("127.0.0.1", "127.53.0.1", "127.53.0.2", "127.53.0.3")


class Stopped(Exception):
    """A signal or --time-limit ends the run; .status is the exit status."""

    def __init__(self, why, status):
        super().__init__(why)
        self.status = status


def say(message):
    print(f"dead_bench: {message}", file=sys.stderr, flush=True)


# --- processes ------------------------------------------------------------------------------------------------------

def child_preexec():
    try:  # the kernel kills the child when this script dies without cleaning up (Linux)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def spawn(argv, out, env, cwd, grace=0.0, stderr=subprocess.STDOUT):
    """Starts argv in its own session (its own process group), output to the open file `out` (None: ours)."""
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=stderr if out else None, env=env,
                               cwd=cwd, preexec_fn=child_preexec, start_new_session=True)
    RUNNING[process.pid] = (process, grace)
    return process


def kill_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop(process, grace=None):
    """SIGTERM to its group and `grace` s to exit (0: SIGKILL at once), then SIGKILL to the group; reaps it."""
    grace = RUNNING.get(process.pid, (None, 0.0))[1] if grace is None else grace
    if process.returncode is None and process.poll() is None:
        if grace > 0:
            kill_group(process.pid, signal.SIGTERM)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        if process.poll() is None:
            kill_group(process.pid, signal.SIGKILL)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                pass
    kill_group(process.pid, signal.SIGKILL)  # whatever it left in its group
    RUNNING.pop(process.pid, None)


def stop_all():
    for process, grace in list(RUNNING.values()):
        try:
            stop(process, grace)
        except Exception:
            try:
                process.kill()
            except Exception:
                pass


def run_timed(argv, log_path, env, cwd, timeout):
    """Runs argv to its end or `timeout` s (then its group is killed): wall seconds, exit status, CPU, peak RSS."""
    with open(log_path, "wb") as log:
        start = time.monotonic()
        process = spawn(argv, log, env, cwd)
    deadline = start + timeout
    timed_out = False
    nap = 0.0005
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        now = time.monotonic()
        if pid:
            break
        if now >= deadline:
            timed_out = True
            kill_group(process.pid, signal.SIGKILL)
            pid, status, usage = os.wait4(process.pid, 0)
            now = time.monotonic()
            break
        time.sleep(min(nap, deadline - now, 0.005))
        nap *= 2
    process.returncode = os.waitstatus_to_exitcode(status)
    kill_group(process.pid, signal.SIGKILL)
    RUNNING.pop(process.pid, None)
    return {"seconds": now - start, "exit": process.returncode, "timed_out": timed_out,
            "cpu_s": usage.ru_utime + usage.ru_stime, "max_rss_kib": usage.ru_maxrss}


def clean_env(root):
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    home = os.path.join(root, "home")
    os.makedirs(home, exist_ok=True)
    env.update(HOME=home, XDG_CONFIG_HOME=f"{home}/.config", XDG_STATE_HOME=f"{home}/.state",
               XDG_CACHE_HOME=f"{home}/.cache", LC_ALL="C")
    return env


def version_of(name, binary):
    argv = [binary, "--version"]
    try:
        out = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=15, env=clean_env(
            tempfile.gettempdir())).stdout.decode(errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return (out.strip().splitlines() or ["?"])[0][:100]


def tail_of(path, size=400):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode(errors="replace").strip()
    except OSError:
        return ""


def files_under(path):
    return sum(len(names) for _, _, names in os.walk(path))


# --- the list parts -------------------------------------------------------------------------------------------------

def list_command(client, binary, list_file, curl_config, out_dir, at_once):
    n = str(at_once)
    if client == "downpour":
        return [binary, "get", "--no-conf", "-i", list_file, "-j", n, "-d", out_dir, "--quiet"]
    if client == "aria2c":
        return [binary, "--no-conf", "-i", list_file, "-j", n, "-d", out_dir, "--console-log-level=warn",
                "--summary-interval=0"]
    if client == "curl":  # -q first: no .curlrc
        return [binary, "-q", "--parallel", "--parallel-max", n, "-sS", "-f", "--config", curl_config]
    if client == "wget2":
        return [binary, "--no-config", "-q", "--max-threads", n, "-i", list_file, "-P", out_dir]
    raise ValueError(client)


def count_lines(path):
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def run_list_part(part, urls, names, clients, binaries, work, at_once, run_timeout, env, results, dns_log=None):
    """Each client once over the same list; a result dict per client, appended to `results` as each ends."""
    list_file = os.path.join(work, "list.txt")
    with open(list_file, "w") as f:
        f.write("".join(u + "\n" for u in urls))
    for client in clients:
        out_dir = os.path.join(work, f"{client}-out")
        os.makedirs(out_dir)
        curl_config = os.path.join(work, f"{client}-curl.conf")
        if client == "curl":
            with open(curl_config, "w") as f:
                for url, name in zip(urls, names):
                    f.write(f'url = "{url}"\noutput = "{os.path.join(out_dir, name)}"\n')
        argv = list_command(client, binaries[client], list_file, curl_config, out_dir, at_once)
        log = os.path.join(work, f"{client}.log")
        queries = count_lines(dns_log) if dns_log else 0
        say(f"{part}: {client}, {len(urls)} URLs, {at_once} at once (deadline {run_timeout:.0f} s) ...")
        r = run_timed(argv, log, env, work, run_timeout)
        r.update(part=part, client=client, urls=len(urls), argv=argv, files_left=files_under(out_dir),
                 output_tail=tail_of(log), per_url_ms=1000 * r["seconds"] / len(urls))
        if dns_log:
            r["dns_queries"] = count_lines(dns_log) - queries
        say(f"{part}: {client}: {r['seconds']:.2f} s, exit {r['exit']}{' (TIMED OUT)' if r['timed_out'] else ''}"
            + (f", {r['dns_queries']} DNS queries" if dns_log else "") + f", {r['files_left']} files left")
        results.append(r)


def reserve_refused_port():
    """A TCP socket bound to a free loopback port and never listening: connects to it are refused, and nothing else
    can take the port while we hold it."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    probe = socket.socket()
    probe.settimeout(3)
    try:
        probe.connect(("127.0.0.1", port))
    except ConnectionRefusedError:
        pass
    else:
        raise RuntimeError(f"127.0.0.1:{port} accepted a connection; cannot make a refusing port")
    finally:
        probe.close()
    return s, port


# --- the resolver (runs as its own process) -------------------------------------------------------------------------

def nxdomain_reply(data):
    """The reply to one DNS query: its ID and question echoed, RCODE 3 (NXDOMAIN); (reply or None, qname, qtype)."""
    if len(data) < 12:
        return None, "?", 0
    qid, flags, qdcount = struct.unpack("!HHH", data[:6])
    if flags & 0x8000:  # a response: not ours to answer
        return None, "?", 0
    opcode = (flags >> 11) & 0xF
    i, labels, question, qtype = 12, [], b"", 0
    if qdcount >= 1:
        while i < len(data):
            length = data[i]
            if length == 0 or length & 0xC0:
                break
            labels.append(data[i + 1:i + 1 + length].decode("ascii", "replace"))
            i += 1 + length
        if i < len(data) and data[i] == 0 and i + 5 <= len(data):
            qtype = struct.unpack("!H", data[i + 1:i + 3])[0]
            question = data[12:i + 5]
    if opcode != 0:
        rcode = 4  # NOTIMP
    elif qdcount != 1 or not question:
        rcode = 1  # FORMERR
    else:
        rcode = 3  # NXDOMAIN
    out_flags = 0x8000 | (opcode << 11) | (flags & 0x0100) | 0x0080 | rcode  # QR, opcode, RD echoed, RA, RCODE
    head = struct.pack("!HHHHHH", qid, out_flags, 1 if question else 0, 0, 0, 0)
    return head + question, ".".join(labels) or ".", qtype


def serve_nxdomain(query_log, ready_file):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    errors = []
    for address in DNS_FALLBACK_ADDRESSES:
        try:
            sock.bind((address, 53))
            break
        except OSError as e:
            errors.append(f"{address}:53: {e}")
    else:
        print(f"dead_bench resolver: cannot bind port 53: {'; '.join(errors)}", file=sys.stderr)
        return 3
    log = open(query_log, "a", buffering=1)
    with open(ready_file + ".tmp", "w") as f:
        f.write(address)
    os.rename(ready_file + ".tmp", ready_file)
    while True:
        data, peer = sock.recvfrom(4096)
        if not peer[0].startswith("127."):
            continue
        reply, qname, qtype = nxdomain_reply(data)
        if reply:
            sock.sendto(reply, peer)
        log.write(f"{qname} {qtype}\n")


# --- the nxdomain part, inside the mount namespace ------------------------------------------------------------------

def check_resolver(resolv_conf, address, env, work, query_log):
    """Raises RuntimeError unless this namespace resolves only through our resolver."""
    with open("/etc/resolv.conf") as f:
        in_effect = f.read()
    if in_effect != resolv_conf:
        raise RuntimeError(f"/etc/resolv.conf in the namespace is not ours: {in_effect[:200]!r}")
    servers = [line.split()[1] for line in in_effect.splitlines() if line.split()[:1] == ["nameserver"]]
    if servers != [address]:
        raise RuntimeError(f"resolv.conf names {servers}, not only {address}")
    with open("/etc/nsswitch.conf") as f:
        hosts = [line.split(None, 1)[1].strip() for line in f if line.split()[:1] == ["hosts:"]]
    if hosts != ["files dns"]:
        raise RuntimeError(f"/etc/nsswitch.conf hosts: {hosts}, not 'files dns'")
    with open("/etc/hosts") as f:
        if "dead.test" in f.read():
            raise RuntimeError("/etc/hosts names dead.test")
    probe = f"probe-{secrets.token_hex(4)}.dead.test"
    code = ("import socket, sys\n"
            "try:\n"
            f"    socket.getaddrinfo({probe!r}, 80, proto=socket.IPPROTO_TCP)\n"
            "    print('resolved'); sys.exit(1)\n"
            "except socket.gaierror as e:\n"
            "    print(e.errno); sys.exit(0 if e.errno == socket.EAI_NONAME else 2)\n")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30, env=env, cwd=work,
                              stdin=subprocess.DEVNULL, preexec_fn=child_preexec)
    except subprocess.TimeoutExpired:
        raise RuntimeError("the probe lookup did not end within 30 s") from None
    if done.returncode != 0:
        raise RuntimeError(f"the probe lookup did not fail with EAI_NONAME: {done.stdout.decode().strip()!r} "
                           f"{done.stderr.decode()[-200:]!r}")
    with open(query_log) as f:
        if not any(line.split()[:1] == [probe] for line in f):
            raise RuntimeError("the probe lookup failed, but never reached our resolver")
    return probe


def inner_nxdomain(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)

    def on_signal(signum, frame):
        raise Stopped(f"{signal.Signals(signum).name} received", 128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    atexit.register(stop_all)
    work = spec["work"]
    result = {"results": [], "notes": []}
    try:
        env = clean_env(work)
        query_log = os.path.join(work, "queries.log")
        ready = os.path.join(work, "resolver.ready")
        open(query_log, "w").close()
        with open(os.path.join(work, "resolver.out"), "wb") as out:
            resolver = spawn([sys.executable, os.path.abspath(__file__), "--serve-nxdomain", query_log, ready],
                             out, env, work)
        deadline = time.monotonic() + 15
        while not os.path.exists(ready):
            if resolver.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the resolver did not start: {tail_of(os.path.join(work, 'resolver.out'))}")
            time.sleep(0.02)
        with open(ready) as f:
            address = f.read().strip()
        resolv_conf = f"# dead_bench.py: one resolver on loopback, NXDOMAIN for every name\nnameserver {address}\n"
        with open(os.path.join(work, "resolv.conf"), "w") as f:
            f.write(resolv_conf)
        with open("/etc/nsswitch.conf") as f:
            lines = [line for line in f if line.split()[:1] != ["hosts:"]]
        with open(os.path.join(work, "nsswitch.conf"), "w") as f:
            f.write("".join(lines) + "hosts: files dns\n")
        for name in ("resolv.conf", "nsswitch.conf"):
            subprocess.run(["mount", "--bind", os.path.join(work, name), f"/etc/{name}"], check=True, timeout=15,
                           stdin=subprocess.DEVNULL, capture_output=True)
        probe = check_resolver(resolv_conf, address, env, work, query_log)
        result["notes"].append(f"resolver {address}:53 in effect (probe {probe} answered NXDOMAIN by it)")
        say(f"nxdomain: resolv.conf in this namespace names only {address}:53 (ours); probe {probe} -> NXDOMAIN")
        result["resolver"] = address
        run_list_part("nxdomain", spec["urls"], spec["names"], spec["clients"], spec["binaries"], work,
                      spec["at_once"], spec["run_timeout"], env, result["results"], query_log)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        detail = e.stderr.decode(errors="replace").strip() if isinstance(e, subprocess.CalledProcessError) else ""
        result["error"] = f"{e} {detail}".strip()
    except Stopped as e:
        result["error"] = f"stopped: {e}"
    finally:
        stop_all()
    with open(spec["result"] + ".tmp", "w") as f:
        json.dump(result, f)
    os.rename(spec["result"] + ".tmp", spec["result"])
    return 0


def run_nxdomain(args, binaries, clients, root, notes):
    if not shutil.which("unshare") or not shutil.which("mount"):
        notes.append("nxdomain: skipped: unshare or mount (util-linux) not found")
        return []
    if os.geteuid() != 0:
        notes.append("nxdomain: skipped: needs root (unshare --mount and bind mounts)")
        return []
    work = os.path.join(root, "nxdomain")
    os.makedirs(work)
    urls = [f"http://h{i:04d}.dead.test/f{i:04d}.bin" for i in range(1, args.urls + 1)]
    names = [f"f{i:04d}.bin" for i in range(1, args.urls + 1)]
    spec = {"work": work, "urls": urls, "names": names, "clients": clients, "binaries": binaries,
            "at_once": args.at_once, "run_timeout": args.run_timeout, "result": os.path.join(work, "result.json")}
    spec_path = os.path.join(root, "nxdomain.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    with open("/etc/resolv.conf", "rb") as f:
        host_resolv = f.read()
    argv = ["unshare", "--mount", "--propagation", "private", "--", sys.executable, os.path.abspath(__file__),
            "--inner-nxdomain", spec_path]
    inner = spawn(argv, None, clean_env(root), root, grace=15)
    deadline = time.monotonic() + len(clients) * (args.run_timeout + 15) + 60
    try:
        inner.wait(max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        notes.append("nxdomain: the namespace's runner passed its deadline; killed")
    stop(inner)
    with open("/etc/resolv.conf", "rb") as f:
        if f.read() != host_resolv:
            notes.append("WARNING: the host's /etc/resolv.conf changed during the nxdomain part")
    try:
        with open(spec["result"]) as f:
            result = json.load(f)
    except (OSError, ValueError):
        notes.append(f"nxdomain: no result from the namespace (exit {inner.returncode})")
        return []
    notes.extend(f"nxdomain: {n}" for n in result.get("notes", []))
    if result.get("error"):
        notes.append(f"nxdomain: {'stopped' if result['results'] else 'skipped'}: {result['error']}")
    return result.get("results", [])


# --- the daemon part ------------------------------------------------------------------------------------------------


class RPC:
    def __init__(self, port, secret):
        self.port, self.token = port, f"token:{secret}"
        self.connection = None

    def call(self, method, *params, timeout=60):
        body = json.dumps({"jsonrpc": "2.0", "id": "d", "method": method, "params": [self.token, *params]})
        return self._post(body, timeout)

    def multicall(self, calls, timeout=120):
        entries = [{"methodName": m, "params": [self.token, *p]} for m, p in calls]
        body = json.dumps({"jsonrpc": "2.0", "id": "m", "method": "system.multicall", "params": [entries]})
        return self._post(body, timeout)

    def _post(self, body, timeout):
        for attempt in (1, 2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            self.connection.timeout = timeout
            if self.connection.sock is not None:
                self.connection.sock.settimeout(timeout)
            try:
                self.connection.request("POST", "/jsonrpc", body, {"Content-Type": "application/json"})
                response = self.connection.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException):
                self.close()
                if attempt == 2:
                    raise
                continue
            reply = json.loads(data)
            if "error" in reply:
                raise RuntimeError(f"RPC error: {reply['error']}")
            return reply["result"]

    def close(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def vm_hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def run_daemon(client, binary, count, refused_port, args, root):
    work = os.path.join(root, f"daemon-{client}")
    os.makedirs(f"{work}/dl")
    port, secret = free_port(), secrets.token_hex(16)
    common = [f"--rpc-listen-port={port}", f"--rpc-secret={secret}", f"--dir={work}/dl", "--no-conf",
              f"--max-concurrent-downloads={args.at_once}", f"--max-download-result={count}"]
    if client == "downpour":
        argv = [binary, "daemon", *common, f"--state-dir={work}/state"]
    else:
        argv = [binary, "--enable-rpc", *common, "--console-log-level=warn", "--summary-interval=0"]
    log_path = os.path.join(work, "daemon.log")
    with open(log_path, "wb") as log:
        process = spawn(argv, log, clean_env(work), work, grace=15)
    rpc = RPC(port, secret)
    result = {"part": "daemon", "client": client, "urls": count, "argv": argv}
    try:
        end = time.monotonic() + args.start_deadline
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{client} daemon exited {process.returncode}: {tail_of(log_path)!r}")
            try:
                result["version"] = rpc.call("aria2.getVersion", timeout=5).get("version")
                break
            except (OSError, RuntimeError, ValueError, http.client.HTTPException):
                if time.monotonic() > end:
                    raise RuntimeError(f"{client} daemon did not answer within {args.start_deadline:.0f} s: "
                                       f"{tail_of(log_path)!r}") from None
                time.sleep(0.1)
        urls = [f"http://127.0.0.1:{refused_port}/d{i:05d}.bin" for i in range(1, count + 1)]
        say(f"daemon: {client}: adding {count} refused URLs in batches of {args.batch} "
            f"(deadline {args.daemon_deadline:.0f} s) ...")
        start = time.monotonic()
        deadline = start + args.daemon_deadline
        add_faults = 0
        for i in range(0, count, args.batch):
            replies = rpc.multicall([("aria2.addUri", ([u],)) for u in urls[i:i + args.batch]])
            add_faults += sum(1 for r in replies if not isinstance(r, list))
            if time.monotonic() > deadline:
                raise RuntimeError("the adds passed the deadline")
        result["add_seconds"] = time.monotonic() - start
        result["add_faults"] = add_faults
        stat, last_print = {}, start
        while True:
            stat = rpc.call("aria2.getGlobalStat", timeout=30)
            now = time.monotonic()
            if int(stat["numActive"]) == 0 and int(stat["numWaiting"]) == 0:
                result["finished"] = True
                break
            if process.poll() is not None:
                raise RuntimeError(f"{client} daemon exited {process.returncode} meanwhile: {tail_of(log_path)!r}")
            if now > deadline:
                result["finished"] = False
                break
            if now - last_print > 60:
                say(f"daemon: {client}: {now - start:.0f} s, {stat['numActive']} active, {stat['numWaiting']} "
                    f"waiting, {stat.get('numStopped')} stopped")
                last_print = now
            time.sleep(args.poll)
        result["seconds"] = now - start
        result["per_url_ms"] = 1000 * result["seconds"] / count
        result["last_stat"] = stat
        statuses, error_codes, offset = {}, {}, 0
        while True:
            page = rpc.call("aria2.tellStopped", offset, 1000, ["gid", "status", "errorCode"], timeout=60)
            for entry in page:
                statuses[entry.get("status")] = statuses.get(entry.get("status"), 0) + 1
                if entry.get("status") == "error":
                    code = str(entry.get("errorCode"))
                    error_codes[code] = error_codes.get(code, 0) + 1
            offset += len(page)
            if len(page) < 1000 or offset >= count:
                break
        result.update(ended=offset, statuses=statuses, error_codes=error_codes, errors=statuses.get("error", 0),
                      daemon_vmhwm_kib=vm_hwm_kib(process.pid))
        say(f"daemon: {client}: {'all ended' if result['finished'] else 'DID NOT FINISH'} after "
            f"{result['seconds']:.1f} s (adds {result['add_seconds']:.1f} s); stopped {statuses}")
    except (RuntimeError, OSError, ValueError, KeyError, http.client.HTTPException) as e:
        result["error"] = str(e)
        say(f"daemon: {client}: {e}")
    finally:
        rpc.close()
        stop(process)
    return result


# --- the report -----------------------------------------------------------------------------------------------------

def outcome(r):
    if r.get("error") and "seconds" not in r:
        return f"ERROR: {r['error'][:60]}"
    if r["part"] == "daemon":
        if not r.get("finished"):
            s = r.get("last_stat", {})
            return f"did not finish ({s.get('numActive')} active, {s.get('numWaiting')} waiting)"
        return f"ended {r.get('ended')}/{r['urls']}, {r.get('errors')} error"
    return f"TIMED OUT (exit {r['exit']})" if r["timed_out"] else f"exit {r['exit']}"


def complete(r):
    return "seconds" in r and not r.get("timed_out") and r.get("finished", True) and not r.get("error")


def report(results, parts):
    rows = [("case", "client", "time s", "exit/ended", "per URL ms")]
    for r in results:
        seconds = f"{r['seconds']:.2f}" if "seconds" in r else "-"
        per_url = f"{r['per_url_ms']:.2f}" if "per_url_ms" in r else "-"
        rows.append((f"{r['part']} ({r['urls']})", r["client"], seconds, outcome(r), per_url))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for k, row in enumerate(rows):
        print(" | ".join(cell.ljust(w) if i < 2 or i == 3 else cell.rjust(w)
                         for i, (cell, w) in enumerate(zip(row, widths))).rstrip())
        if k == 0:
            print("-+-".join("-" * w for w in widths))
    ratios = {}
    print()
    for part in parts:
        mine = [r for r in results if r["part"] == part and r["client"] == "downpour" and "per_url_ms" in r]
        peers = [r for r in results if r["part"] == part and r["client"] != "downpour" and complete(r)]
        if not mine or not peers:
            continue
        best = min(peers, key=lambda r: r["per_url_ms"])
        ratio = mine[0]["per_url_ms"] / max(best["per_url_ms"], 1e-9)
        bound = "" if complete(mine[0]) else ">= "
        ratios[part] = {"ratio": ratio, "lower_bound": bool(bound), "best_peer": best["client"]}
        print(f"{part}: downpour / best peer ({best['client']}) per URL = {bound}{ratio:.1f}x")
    return ratios


# --- main -----------------------------------------------------------------------------------------------------------

def parse_list(text, allowed, what):
    items = [w.strip() for w in text.split(",") if w.strip()]
    for w in items:
        if w not in allowed:
            raise argparse.ArgumentTypeError(f"unknown {what} {w!r} (known: {', '.join(allowed)})")
    return items


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--serve-nxdomain":
        return serve_nxdomain(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 3 and sys.argv[1] == "--inner-nxdomain":
        return inner_nxdomain(sys.argv[2])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--downpour", help="the downpour binary (e.g. .build/release/downpour); skipped if missing")
    parser.add_argument("--aria2c", default="aria2c")
    parser.add_argument("--curl", default="curl")
    parser.add_argument("--wget2", default="wget2", help="skipped with a note when not installed")
    parser.add_argument("--parts", type=lambda t: parse_list(t, PARTS, "part"), default=list(PARTS),
                        help="comma-separated: refused, nxdomain, daemon (default: all)")
    parser.add_argument("--clients", type=lambda t: parse_list(t, LIST_CLIENTS, "client"),
                        default=list(LIST_CLIENTS), help="comma-separated (default: all that are installed)")
    parser.add_argument("--urls", type=int, default=1000, help="URLs of each list part (default 1000)")
    parser.add_argument("--at-once", type=int, default=16, help="-j / --parallel-max / --max-threads (default 16)")
    parser.add_argument("--daemon-urls", type=int, default=10000, help="URLs added to each daemon (default 10000)")
    parser.add_argument("--downpour-daemon-urls", type=int, help="URLs added to downpour's daemon (default: "
                        "--daemon-urls); per-URL figures and the ratio still compare")
    parser.add_argument("--batch", type=int, default=500, help="addUri calls per system.multicall (default 500)")
    parser.add_argument("--run-timeout", type=float, default=900, help="deadline of one list run, s (default 900)")
    parser.add_argument("--daemon-deadline", type=float, default=1800,
                        help="deadline from the first addUri until nothing is active or waiting, s (default 1800)")
    parser.add_argument("--start-deadline", type=float, default=30, help="for a daemon to answer, s")
    parser.add_argument("--poll", type=float, default=0.25, help="seconds between getGlobalStat polls")
    parser.add_argument("--time-limit", type=float, default=4 * 3600, help="the whole run, s (default 14400)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the temp directory (logs, lists)")
    args = parser.parse_args()
    for name in ("urls", "at_once", "daemon_urls", "batch"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.downpour_daemon_urls is not None and args.downpour_daemon_urls < 1:
        parser.error("--downpour-daemon-urls must be at least 1")

    notes, binaries = [], {}
    for name in args.clients:
        given = getattr(args, name)
        found = find_binary(given)
        if found:
            binaries[name] = found
        else:
            notes.append(f"{name}: skipped (no --downpour given)" if name == "downpour" and not given
                         else f"{name}: skipped ({given!r} not found)")
    if not binaries:
        print("dead_bench: no client found; nothing to run", file=sys.stderr)
        return 2
    clients = [c for c in LIST_CLIENTS if c in binaries]
    versions = {c: version_of(c, b) for c, b in binaries.items()}
    scale = {"downpour": args.downpour_daemon_urls or args.daemon_urls, "aria2c": args.daemon_urls}

    def on_signal(signum, frame):
        raise Stopped(f"{signal.Signals(signum).name} received", 128 + signum)

    def on_alarm(signum, frame):
        raise Stopped(f"the whole run passed --time-limit {args.time_limit:.0f} s", 3)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, args.time_limit)
    atexit.register(stop_all)

    root = tempfile.mkdtemp(prefix="downpour-dead-")
    held, refused_port = reserve_refused_port()
    say("; ".join(f"{c} {binaries[c]} ({versions[c]})" for c in clients))
    daemon_scale = ("; daemon URLs: " + ", ".join(f"{c} {scale[c]}" for c in DAEMON_CLIENTS if c in binaries)
                    if "daemon" in args.parts else "")
    say(f"parts {','.join(args.parts)}; {args.urls} URLs per list, {args.at_once} at once{daemon_scale}; "
        f"refused port 127.0.0.1:{refused_port}; temp {root}")
    results, status = [], 0
    try:
        for part in args.parts:
            if part == "refused":
                work = os.path.join(root, "refused")
                os.makedirs(work)
                urls = [f"http://127.0.0.1:{refused_port}/f{i:04d}.bin" for i in range(1, args.urls + 1)]
                names = [f"f{i:04d}.bin" for i in range(1, args.urls + 1)]
                run_list_part("refused", urls, names, clients, binaries, work, args.at_once, args.run_timeout,
                              clean_env(work), results)
            elif part == "nxdomain":
                results += run_nxdomain(args, binaries, clients, root, notes)
            else:
                for client in (c for c in DAEMON_CLIENTS if c in binaries):
                    results.append(run_daemon(client, binaries[client], scale[client], refused_port, args, root))
    except Stopped as e:
        status = e.status
        notes.append(f"stopped early: {e}; partial results")
        say(f"stopped early: {e}")
    except KeyboardInterrupt:
        status = 130
        notes.append("stopped early: SIGINT; partial results")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        stop_all()
        held.close()
        if args.keep:
            say(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    if "daemon" in args.parts and len({scale[c] for c in DAEMON_CLIENTS if c in binaries}) > 1:
        notes.append("daemon part scaled: " + ", ".join(f"{c} {scale[c]} URLs" for c in DAEMON_CLIENTS
                                                        if c in binaries) + " (per-URL figures compare)")
    print(f"dead links: {args.urls} URLs per list, {args.at_once} at once; one run each")
    ratios = report(results, args.parts)
    for r in results:
        if r.get("files_left"):
            notes.append(f"{r['part']} / {r['client']}: left {r['files_left']} files in its directory")
        if r.get("add_faults"):
            notes.append(f"daemon / {r['client']}: {r['add_faults']} addUri calls faulted")
    for n in notes:
        print(f"note: {n}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"binaries": binaries, "versions": versions, "parts": args.parts, "notes": notes,
                       "settings": {"urls": args.urls, "at_once": args.at_once, "daemon_urls": scale,
                                    "batch": args.batch, "run_timeout": args.run_timeout,
                                    "daemon_deadline": args.daemon_deadline},
                       "results": results, "ratios_downpour_over_best_peer": ratios}, f, indent=2)
    return status


if __name__ == "__main__":
    sys.exit(main())
