"""The benchmark's nginx: its configuration (written by scripts/lib/nginx.sh from cases.SERVER), starting it on a
free port or in a network namespace, stopping it by PID, and what the cases read from it (accepted connections,
connection serial numbers, conn.log). Stdlib only."""

import os
import random
import shutil
import socket
import subprocess
import time
import urllib.request

from cases import SERVER

HERE = os.path.dirname(os.path.abspath(__file__))
NGINX_SH = os.path.join(HERE, "..", "lib", "nginx.sh")


def find_nginx():
    return shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)


def has_stub_status(nginx):
    """nginx's counter of accepted connections (location /status), when this build has it (Debian's has)."""
    result = subprocess.run([nginx, "-V"], capture_output=True, text=True)
    return "--with-http_stub_status_module" in result.stdout + result.stderr


def children_of(pid):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found


def stop(process, name, note):
    """SIGTERM, up to 5 s, then SIGKILL (and the children seen before, so that nginx workers are not orphaned)."""
    if process is None or process.poll() is not None:
        return
    children = children_of(process.pid)
    process.terminate()
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        note(f"{name} (pid {process.pid}) did not stop in 5 s, killing it")
        process.kill()
        process.wait()
    for child in children:
        try:
            os.kill(child, 9)
        except OSError:
            pass


def get(url, timeout=5):
    """The body of a GET on a new connection, or None."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return reply.read().decode()
    except (OSError, ValueError):
        return None


class Nginx:
    """One nginx with the benchmark's configuration, prefix `prefix` (logs, pid, conn.log, mirrors.log)."""

    def __init__(self, nginx, prefix, www, stub_status, note):
        self.nginx, self.prefix, self.www, self.stub_status, self.note = nginx, prefix, www, stub_status, note
        self.process = None
        os.makedirs(os.path.join(prefix, "tmp"), exist_ok=True)

    def write_conf(self, listen, mirror_listen=""):
        conf = os.path.join(self.prefix, "nginx.conf")
        settings = [f"listen={listen}", f"dir={self.prefix}", f"www={self.www}", f"mirror_listen={mirror_listen}",
                    f"stub_status={1 if self.stub_status else 0}", *SERVER.nginx_settings()]
        with open(conf, "w") as f:
            subprocess.run(["bash", NGINX_SH, "bench-conf", *settings], stdout=f, check=True)
        return conf

    def start(self, conf, ready, prefix_argv=()):
        """Runs nginx in the foreground of its own process (under `prefix_argv`, e.g. ip netns exec NS); True once
        ready() is, False when nginx exited or was not ready within 6 s (it is stopped then)."""
        with open(os.path.join(self.prefix, "nginx.out"), "ab") as out:
            self.process = subprocess.Popen(
                [*prefix_argv, self.nginx, "-p", self.prefix + "/", "-c", conf, "-e",
                 os.path.join(self.prefix, "error.log"), "-g", "daemon off;"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.process = None
                return False
            if ready():
                return True
            time.sleep(0.1)
        self.stop()
        return False

    def start_on_free_port(self):
        """127.0.0.1:P and the second mirror on 127.0.0.2:P+1, for up to 8 random P; returns P."""
        for _ in range(8):
            port = random.randint(20000, 60000)
            if not (port_free("127.0.0.1", port) and port_free("127.0.0.2", port + 1)):
                continue
            conf = self.write_conf(f"127.0.0.1:{port}", f"127.0.0.2:{port + 1}")
            if self.start(conf, lambda: get(f"http://127.0.0.1:{port}/conn", 2) is not None):
                return port
            self.note(f"nginx did not come up on port {port}, retrying")
        self.note("could not start nginx; its log:")
        for log in ("error.log", "nginx.out"):
            try:
                with open(os.path.join(self.prefix, log)) as f:
                    self.note("".join(f.readlines()[-20:]))
            except OSError:
                pass
        raise SystemExit(1)

    def stop(self):
        stop(self.process, "nginx", self.note)
        self.process = None

    def conn_log_size(self):
        try:
            return os.path.getsize(os.path.join(self.prefix, "conn.log"))
        except OSError:
            return 0

    def conn_log_stats(self, offset):
        """From conn.log after byte `offset`: (distinct $connection serials, requests, first request's start to
        the last one's end in seconds), or None when no request was logged."""
        try:
            with open(os.path.join(self.prefix, "conn.log"), "rb") as f:
                f.seek(offset)
                lines = f.read().decode(errors="replace").splitlines()
        except OSError:
            return None
        serials, starts, ends = set(), [], []
        for line in lines:
            fields = line.split()
            try:
                end, duration = float(fields[2]), float(fields[3])
            except (IndexError, ValueError):
                continue
            serials.add(fields[0])
            starts.append(end - duration)
            ends.append(end)
        if not ends:
            return None
        return len(serials), len(ends), max(ends) - min(starts)


def port_free(address, port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
            return True
        except OSError:
            return False


def accepted_count(base):
    """nginx's count of accepted connections (stub_status), or None."""
    body = get(f"{base}/status")
    try:
        return int(body.splitlines()[2].split()[0])
    except (AttributeError, IndexError, ValueError):
        return None


def align_connections(base):
    """Makes throwaway connections until the next one nginx accepts gets a serial number = 1 (mod 4), so that in
    the straggler case every client's 4th, 8th, ... connection is the slow one, whatever ran before it."""
    for _ in range(8):
        serial = (get(f"{base}/conn") or "").strip()
        if not serial.isdigit():
            return False
        if int(serial) % 4 == 0:
            return True
    return False
