"""What the fleet's test and benchmark share: a throw-away PostgreSQL cluster, an nginx whose configuration comes
from scripts/lib/nginx.sh, and `downpour daemon` nodes on a queue in PostgreSQL. Every wait has a deadline."""

import glob
import hashlib
import json
import os
import pwd
import shutil
import subprocess
import time
import urllib.request

from ports import free_port

HERE = os.path.dirname(os.path.abspath(__file__))


def wait_for(what, condition, limit=120):
    deadline = time.monotonic() + limit
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting for {what}")
        time.sleep(0.1)


def call(port, method, *params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/jsonrpc", data=body)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as error:
        answer = json.load(error)
    if "error" in answer:
        raise RuntimeError(f"{method}: {answer['error']}")
    return answer["result"]


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Postgres:
    """initdb into `directory`, started on a free loopback port; as the user postgres when run as root."""

    def __init__(self, directory):
        self.directory = directory
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        self.bin = os.path.dirname(found[-1]) if found else os.path.dirname(shutil.which("initdb") or "")
        if not self.bin:
            raise RuntimeError("no PostgreSQL server here (apt-get install postgresql)")
        self.prefix = []
        if os.getuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chown(directory, entry.pw_uid, entry.pw_gid)
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.run("initdb", "-D", f"{directory}/data", "-U", "downpour", "-A", "trust", "--no-sync")
        for _ in range(5):
            self.port = free_port()
            if self.start_server():
                self.url = f"postgresql://downpour@127.0.0.1:{self.port}/postgres?sslmode=disable"
                return
        raise RuntimeError("PostgreSQL did not start")

    def start_server(self):
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        return self.run("pg_ctl", "-D", f"{self.directory}/data", "-l", f"{self.directory}/log", "-w", "-o", options,
                        "start", check=False).returncode == 0

    def stop_server(self):
        """Stops the server (fast: its clients lose their connections), keeping the cluster for start_server()."""
        self.run("pg_ctl", "-D", f"{self.directory}/data", "-m", "fast", "-w", "stop")

    def restart(self, down=2.0):
        """stop_server(), `down` seconds down, then started again on the same port."""
        self.stop_server()
        time.sleep(down)
        if not self.start_server():
            raise RuntimeError("PostgreSQL did not start again")

    def database(self, name):
        """A new database of this cluster; its URL."""
        self.run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "downpour", name)
        return f"postgresql://downpour@127.0.0.1:{self.port}/{name}?sslmode=disable"

    def run(self, program, *arguments, check=True):
        return subprocess.run(self.prefix + [f"{self.bin}/{program}", *arguments], check=check,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)

    def stop(self):
        self.run("pg_ctl", "-D", f"{self.directory}/data", "-m", "immediate", "-w", "stop", check=False)


class Nginx:
    """nginx serving `www` (at `rate` per connection, when given), its configuration from scripts/lib/nginx.sh."""

    def __init__(self, work, www, rate, settings=()):
        self.work = work
        os.makedirs(f"{work}/tmp", exist_ok=True)
        self.port = free_port()
        conf = subprocess.run(
            ["bash", f"{HERE}/nginx.sh", "interop-conf", f"dir={work}", f"www={www}",
             f"listen=127.0.0.1:{self.port}", *([f"limit_path=/", f"limit_rate={rate}"] if rate else []),
             *settings],
            check=True, capture_output=True, text=True).stdout
        with open(f"{work}/nginx.conf", "w") as file:
            file.write(conf)
        self.process = subprocess.Popen(
            ["nginx", "-p", f"{work}/", "-c", f"{work}/nginx.conf", "-e", f"{work}/error.log", "-g", "daemon off;"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("nginx", lambda: self.answers(), limit=10)

    def answers(self):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=2).close()
            return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    def log_size(self):
        """Where timed.log ends now: requests(since=...) reads what comes after."""
        try:
            return os.path.getsize(f"{self.work}/timed.log")
        except OSError:
            return 0

    def requests(self, since=0):
        """Every response from timed.log (from byte `since` of it): (path, start, end, bytes, user agent, Range header)."""
        entries = []
        with open(f"{self.work}/timed.log") as file:
            file.seek(since)
            for line in file:
                fields = line.split('"')
                if len(fields) < 5:
                    continue
                end, duration = (float(value) for value in fields[0].split())
                request = fields[1].split()
                status = fields[2].split()
                if len(request) >= 2 and len(status) >= 2 and status[1].isdigit():
                    asked = fields[5] if len(fields) >= 7 and fields[5] != "-" else None
                    entries.append((request[1], end - duration, end, int(status[1]), fields[3], asked))
        return entries

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)


class Node:
    def __init__(self, binary, name, database, work, downloads, arguments=()):
        self.binary, self.name, self.database, self.downloads = binary, name, database, downloads
        self.arguments = list(arguments)
        self.state = f"{work}/{name}-state"
        self.log = open(f"{work}/{name}.log", "ab")
        self.port = free_port()
        self.process = None

    def start(self):
        """Started, and answering; on a new port when another process took this one meanwhile."""
        for attempt in range(3):
            self.log.flush()
            logged = os.path.getsize(self.log.name)
            self.process = subprocess.Popen(
                [self.binary, "daemon", *(["--queue", self.database] if self.database else []), "--node-name",
                 self.name, "--rpc-listen-port", str(self.port), "--state-dir", self.state, "--dir", self.downloads,
                 "--user-agent", self.name, "--no-conf", *self.arguments],
                stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
            try:
                wait_for(f"{self.name} to answer", lambda: self.answers(), limit=60)
                return
            except RuntimeError:
                with open(self.log.name, "rb") as file:
                    file.seek(logged)
                    taken = b"Address already in use" in file.read()
                if not taken or attempt == 2:
                    raise
                self.port = free_port()

    def answers(self):
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}")
        try:
            call(self.port, "aria2.getVersion")
            return True
        except OSError:
            return False

    def kill(self):
        self.process.kill()
        self.process.wait(timeout=10)

    def rss_kib(self):
        """The node's resident memory now (Linux)."""
        with open(f"/proc/{self.process.pid}/status") as file:
            for line in file:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
