#!/usr/bin/env python3
"""Session files both ways, with aria2c itself, and a second aria2 client (aria2tui) against the daemon.

1. `downpour daemon` with save-session: two paused downloads (options, two headers), aria2.saveSession; the file
   loads into `aria2c --input-file` with the same GIDs, paused, and the same options.
2. aria2c saves its session (aria2.saveSession); `downpour daemon --input-file` loads it with the same GIDs.
3. aria2tui (pip aria2tui) lists a download of the daemon through aria2.getOption (scripts/aria2/client_getoption_check.py).

Usage: aria2_session_interop.py BINARY   (needs aria2c; aria2tui for step 3). Every wait has a deadline.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from ports import free_port  # noqa: E402

SECRET = "interop"


def call(port, method, *params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": ["token:" + SECRET, *params]})
    request = urllib.request.Request(f"http://127.0.0.1:{port}/jsonrpc", data=body.encode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as error:
        answer = json.load(error)
    if "error" in answer:
        raise RuntimeError(f"{method}: {answer['error']}")
    return answer["result"]


def wait_up(port, process, what):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        try:
            call(port, "aria2.getVersion")
            return
        except (OSError, RuntimeError):
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not answer within 30 s")


def stop(process):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main():
    binary = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="downpour-session-interop.")
    processes = []
    failures = []

    def check(condition, message):
        print(("ok   " if condition else "FAIL ") + message)
        if not condition:
            failures.append(message)

    def downpour(port, *extra):
        p = subprocess.Popen(
            [binary, "daemon", "--rpc-listen-port", str(port), "--rpc-secret", SECRET,
             "--state-dir", os.path.join(work, f"state-{port}"), "-d", os.path.join(work, "dl"), *extra],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, f"downpour-{port}.err"), "w"))
        processes.append(p)
        wait_up(port, p, "downpour daemon")
        return p

    def aria2c(port, *extra):
        home = os.path.join(work, "home")
        os.makedirs(home, exist_ok=True)
        env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=home, XDG_CACHE_HOME=home)
        p = subprocess.Popen(
            ["aria2c", "--no-conf", "--enable-rpc", f"--rpc-listen-port={port}", f"--rpc-secret={SECRET}",
             "-d", os.path.join(work, "dl-aria2"), *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        processes.append(p)
        wait_up(port, p, "aria2c")
        return p

    try:
        # 1. Downpour writes, aria2c reads.
        session = os.path.join(work, "downpour.session")
        port = free_port()
        daemon = downpour(port, f"--save-session={session}")
        gids = [
            call(port, "aria2.addUri", ["http://127.0.0.1:9/one.iso", "http://127.0.0.1:9/mirror/one.iso"],
                 {"pause": "true", "split": "3", "header": ["X-A: 1", "X-B: 2"], "out": "one.iso"}),
            call(port, "aria2.addUri", ["http://127.0.0.1:9/two.bin"], {"pause": "true", "max-download-limit": "1M"}),
        ]
        check(call(port, "aria2.saveSession") == "OK", "downpour: aria2.saveSession")
        stop(daemon)
        with open(session) as f:
            print(f.read().rstrip("\n").replace("\n", "\n     | "))
        port = free_port()
        aria = aria2c(port, f"--input-file={session}")
        waiting = call(port, "aria2.tellWaiting", 0, 10, ["gid", "status"])
        check([w["gid"] for w in waiting] == gids, f"aria2c loads downpour's session with its GIDs: {waiting}")
        check(all(w["status"] == "paused" for w in waiting), "aria2c: both paused")
        options = call(port, "aria2.getOption", gids[0])
        check(options.get("split") == "3" and options.get("out") == "one.iso", f"aria2c: split and out: {options.get('split')}, {options.get('out')}")
        check(options.get("header") == "X-A: 1\nX-B: 2\n", f"aria2c: both headers: {options.get('header')!r}")
        check(call(port, "aria2.getOption", gids[1]).get("max-download-limit") == "1048576", "aria2c: max-download-limit")
        uris = [u["uri"] for u in call(port, "aria2.getFiles", gids[0])[0]["uris"]]
        check("http://127.0.0.1:9/mirror/one.iso" in uris, f"aria2c: the mirror came along: {uris}")

        # 2. aria2c writes, Downpour reads.
        aria_session = os.path.join(work, "aria2.session")
        third = call(port, "aria2.addUri", ["http://127.0.0.1:9/three.bin"], {"pause": "true", "split": "2"})
        call(port, "aria2.changeGlobalOption", {"save-session": aria_session})
        check(call(port, "aria2.saveSession") == "OK", "aria2c: aria2.saveSession")
        stop(aria)
        port = free_port()
        daemon = downpour(port, f"--input-file={aria_session}")
        waiting = call(port, "aria2.tellWaiting", 0, 10, ["gid", "status"])
        check([w["gid"] for w in waiting] == gids + [third], f"downpour loads aria2c's session with its GIDs: {waiting}")
        check(all(w["status"] == "paused" for w in waiting), "downpour: all paused")
        check(call(port, "aria2.getOption", third).get("split") == "2", "downpour: the session's split")

        # 3. A second real client that builds its list from aria2.getOption(gid)["dir"].
        checker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "client_getoption_check.py")
        rc = subprocess.call([sys.executable, checker, "--rpc-url", f"http://127.0.0.1:{port}/jsonrpc",
                              "--secret", SECRET, "--expect-dir", os.path.join(work, "dl")], timeout=120)
        check(rc == 0, "aria2tui lists the daemon's downloads (getOption's dir)")
        stop(daemon)
    finally:
        for p in processes:
            stop(p)
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"aria2-session-interop: FAILED: {len(failures)} checks")
        return 1
    print("aria2-session-interop: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
