#!/usr/bin/env python3
"""Drives an aria2-compatible daemon's XML-RPC endpoint (`POST /rpc`) through two real XML-RPC clients and checks
the answers: Python's own `xmlrpc.client.ServerProxy` (what aria2's manual shows, with `xmlrpc.client.Binary` and
`xmlrpc.client.MultiCall`), and the PyPI package aiohttp-xmlrpc (`python3 -m pip install aiohttp-xmlrpc==1.5.0`),
an independent implementation: lxml writes its requests (`<i4>` integers, an `encoding='ASCII'` declaration,
non-ASCII as character references) and every answer is validated against its Relax NG schema of XML-RPC before it
is read (so a fault must be a struct of faultCode as <int>/<i4> then faultString, in that order).

Usage: xmlrpc_check.py --url http://127.0.0.1:PORT/rpc --secret S --base-url http://127.0.0.1:HTTPPORT
         [--deadline SECONDS]

BASE-URL serves small.bin. The daemon must run on this machine (the downloaded files are read back from the paths
it reports). Each client in turn, with its own calls only:
  system.listMethods, system.listNotifications, aria2.getVersion, getGlobalOption, changeGlobalOption (read back,
  then restored); addUri of BASE/small.bin with options and a position, waited for until complete, tellStatus with
  keys, the file's bytes against the served file, getOption, tellStopped; addMetalink of a Metalink 4 document (as
  <base64>) pointing at BASE/small.bin, waited for, bytes compared; with max-concurrent-downloads at 1 and one
  download held active by a loopback server that never answers: tellActive, a second download waiting in
  tellWaiting, pause and unpause of it, remove of it, then forceRemove of the active one; system.multicall (the
  client's MultiCall where it has one, and a hand-made list of {methodName, params} structs) with a failing entry;
  a wrong token and a missing token (a Fault with faultCode 1 and faultString 'Unauthorized').
Every wait has a deadline. Prints 'ok NAME' or 'FAIL NAME: why' per check, then 'N passed, M failed'. Exit 0 when
all pass, 1 when any fails, 2 when the PyPI client cannot be imported or the arguments are wrong.
"""

import argparse
import asyncio
import hashlib
import os
import re
import secrets
import signal
import socket
import sys
import threading
import time
import urllib.request
import xmlrpc.client

CALL_TIMEOUT = 20.0  # seconds for one XML-RPC exchange
DOWNLOAD_DEADLINE = 60.0  # seconds for a download to reach a state
UNKNOWN_GID = "0123456789abcdef"
ARIA2_METHODS = [
    "aria2.addUri", "aria2.addTorrent", "aria2.getPeers", "aria2.addMetalink", "aria2.remove", "aria2.pause",
    "aria2.forcePause", "aria2.pauseAll", "aria2.forcePauseAll", "aria2.unpause", "aria2.unpauseAll",
    "aria2.forceRemove", "aria2.changePosition", "aria2.tellStatus", "aria2.getUris", "aria2.getFiles",
    "aria2.getServers", "aria2.tellActive", "aria2.tellWaiting", "aria2.tellStopped", "aria2.getOption",
    "aria2.changeUri", "aria2.changeOption", "aria2.getGlobalOption", "aria2.changeGlobalOption",
    "aria2.purgeDownloadResult", "aria2.removeDownloadResult", "aria2.getVersion", "aria2.getSessionInfo",
    "aria2.shutdown", "aria2.forceShutdown", "aria2.getGlobalStat", "aria2.saveSession", "system.multicall",
    "system.listMethods", "system.listNotifications",
]
ARIA2_NOTIFICATIONS = [
    "aria2.onDownloadStart", "aria2.onDownloadPause", "aria2.onDownloadStop", "aria2.onDownloadComplete",
    "aria2.onDownloadError", "aria2.onBtDownloadComplete",
]
GID = re.compile(r"[0-9a-f]{16}")

try:
    import aiohttp
    import aiohttp_xmlrpc
    import aiohttp_xmlrpc.exceptions
    from aiohttp_xmlrpc.client import ServerProxy as AioServerProxy
    from aiohttp_xmlrpc.common import Binary as AioBinary
    IMPORT_ERROR = None
except Exception as error:  # ImportError, or a broken install of aiohttp/lxml
    IMPORT_ERROR = error


class Fault(Exception):
    """A fault answer, the same for both clients."""

    def __init__(self, code, string):
        super().__init__(f"fault {code!r}: {string!r}")
        self.code, self.string = code, string


class Deadline(BaseException):
    """The whole run took longer than --deadline (not caught by a check)."""


class Failed(Exception):
    """A check's expectation did not hold."""


def expect(condition, why):
    if not condition:
        raise Failed(why)


def short(value, limit=300):
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ------------------------------------------------------------------------------------------ the two clients

class TimeoutTransport(xmlrpc.client.Transport):
    def make_connection(self, host):
        connection = super().make_connection(host)
        connection.timeout = CALL_TIMEOUT
        return connection


class StdlibClient:
    name = "stdlib"

    def __init__(self, url):
        self.proxy = xmlrpc.client.ServerProxy(url, transport=TimeoutTransport())

    @staticmethod
    def binary(data):
        return xmlrpc.client.Binary(data)

    def call(self, method, *params):
        target = self.proxy
        for part in method.split("."):
            target = getattr(target, part)
        try:
            return target(*params)
        except xmlrpc.client.Fault as fault:
            raise Fault(fault.faultCode, fault.faultString) from None

    def multicall(self, calls):
        """calls: [(method, params)]; returns a list of ('ok', result) or ('fault', code, string), through
        xmlrpc.client.MultiCall."""
        mc = xmlrpc.client.MultiCall(self.proxy)
        for method, params in calls:
            target = mc
            for part in method.split("."):
                target = getattr(target, part)
            target(*params)
        results = mc()
        out = []
        for index in range(len(calls)):
            try:
                out.append(("ok", results[index]))
            except xmlrpc.client.Fault as fault:
                out.append(("fault", fault.faultCode, fault.faultString))
        return out

    def close(self):
        pass


class AioClient:
    name = "aiohttp-xmlrpc"

    def __init__(self, url):
        self.loop = asyncio.new_event_loop()

        async def make():
            return AioServerProxy(url, timeout=aiohttp.ClientTimeout(total=CALL_TIMEOUT))
        self.proxy = self.loop.run_until_complete(make())

    @staticmethod
    def binary(data):
        return AioBinary(data)

    def call(self, method, *params):
        target = self.proxy
        for part in method.split("."):
            target = getattr(target, part)
        try:
            return self.loop.run_until_complete(target(*params))
        except aiohttp_xmlrpc.exceptions.XMLRPCError as error:
            # A fault: aiohttp-xmlrpc raises the class registered for faultCode, or ServerError with .code set.
            raise Fault(error.code, error.message) from None

    multicall = None  # aiohttp-xmlrpc has no MultiCall helper

    def close(self):
        try:
            self.loop.run_until_complete(self.proxy.close())
        finally:
            self.loop.close()


# ------------------------------------------------------------------------------------------ a server that never answers

class StallServer:
    """Accepts connections on loopback, reads, never answers: a download from it stays active."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.stopping = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.conns.append(conn)

    def close(self):
        self.stopping = True
        self.thread.join(2)
        for conn in self.conns:
            conn.close()
        self.sock.close()


# ------------------------------------------------------------------------------------------ the checks

class Checker:
    def __init__(self, args):
        self.args = args
        self.token = "token:" + args.secret
        self.base = args.base_url.rstrip("/")
        self.passed = 0
        self.failed = 0
        self.run_id = secrets.token_hex(3)
        with urllib.request.urlopen(self.base + "/small.bin", timeout=CALL_TIMEOUT) as response:
            self.small = response.read()

    def check(self, name, fn, *args, **kwargs):
        """Runs fn(*args, **kwargs); prints ok/FAIL; returns fn's value, or None when it failed."""
        try:
            value = fn(*args, **kwargs)
        except Failed as error:
            self.fail(name, str(error))
            return None
        except Fault as fault:
            self.fail(name, f"unexpected {fault}")
            return None
        except Exception as error:  # transport errors, schema errors, bad answers
            self.fail(name, f"{type(error).__name__}: {error}")
            return None
        self.passed += 1
        print(f"ok {name}", flush=True)
        return value

    def fail(self, name, why):
        self.failed += 1
        print(f"FAIL {name}: {why}", flush=True)

    # -------------------------------------------------------------- helpers on one client

    def status(self, c, gid, keys=("gid", "status")):
        result = c.call("aria2.tellStatus", self.token, gid, list(keys))
        expect(isinstance(result, dict), f"tellStatus({gid}) answered {short(result)}")
        return result

    def wait(self, c, gid, statuses, what):
        deadline = time.monotonic() + DOWNLOAD_DEADLINE
        while True:
            result = self.status(c, gid, ["gid", "status", "errorCode", "errorMessage"])
            if result.get("status") in statuses:
                return result
            if result.get("status") in ("error", "removed", "complete"):
                raise Failed(f"{what}: {gid} stopped as {short(result)}, waited for {sorted(statuses)}")
            if time.monotonic() > deadline:
                raise Failed(f"{what}: {gid} still {short(result)} after {DOWNLOAD_DEADLINE:.0f} s")
            time.sleep(0.2)

    def check_file(self, c, gid):
        files = self.status(c, gid, ["files"]).get("files")
        expect(isinstance(files, list) and files and isinstance(files[0], dict), f"files: {short(files)}")
        path = files[0].get("path")
        expect(isinstance(path, str) and os.path.isfile(path), f"files[0].path is not a file here: {short(path)}")
        with open(path, "rb") as handle:
            data = handle.read()
        expect(data == self.small, f"{path}: {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()[:16]}; "
                                   f"served {len(self.small)} bytes, sha256 "
                                   f"{hashlib.sha256(self.small).hexdigest()[:16]}")
        return path

    def expect_fault(self, c, what, method, *params, code=1, string=None):
        try:
            result = c.call(method, *params)
        except Fault as fault:
            expect(fault.code == code and type(fault.code) is int,
                   f"{what}: faultCode {fault.code!r} ({type(fault.code).__name__}), want int {code}")
            if string is not None:
                expect(fault.string == string, f"{what}: faultString {fault.string!r}, want {string!r}")
            return fault
        raise Failed(f"{what}: answered {short(result)}, want a fault")

    # -------------------------------------------------------------- the scenario for one client

    def scenario(self, c):
        n = c.name
        t = self.token
        label = f"xmlrpc-{n}-{self.run_id}"

        def list_methods():
            methods = c.call("system.listMethods")
            expect(isinstance(methods, list) and all(isinstance(m, str) for m in methods),
                   f"not a list of strings: {short(methods)}")
            missing = [m for m in ARIA2_METHODS if m not in methods]
            expect(not missing, f"missing {missing}")
        self.check(f"{n} system.listMethods", list_methods)

        def list_notifications():
            names = c.call("system.listNotifications")
            expect(names == ARIA2_NOTIFICATIONS, f"{short(names)}, want {ARIA2_NOTIFICATIONS}")
        self.check(f"{n} system.listNotifications", list_notifications)

        def get_version():
            version = c.call("aria2.getVersion", t)
            expect(isinstance(version, dict), f"not a struct: {short(version)}")
            expect(isinstance(version.get("version"), str) and re.fullmatch(r"\d+\.\d+\.\d+", version["version"]),
                   f"version {short(version.get('version'))}")
            features = version.get("enabledFeatures")
            expect(isinstance(features, list) and all(isinstance(f, str) for f in features),
                   f"enabledFeatures {short(features)}")
            return version
        self.check(f"{n} aria2.getVersion", get_version)

        def get_global_option():
            options = c.call("aria2.getGlobalOption", t)
            expect(isinstance(options, dict) and options, f"not a struct: {short(options)}")
            bad = {k: v for k, v in options.items() if not isinstance(v, str)}
            expect(not bad, f"values not strings: {short(bad)}")
            for key in ("dir", "max-concurrent-downloads", "max-overall-download-limit"):
                expect(key in options, f"no {key}")
            return options
        global_options = self.check(f"{n} aria2.getGlobalOption", get_global_option) or {}

        def change_global_option():
            before = global_options.get("max-overall-download-limit", "0")
            expect(c.call("aria2.changeGlobalOption", t, {"max-overall-download-limit": "10M"}) == "OK",
                   "changeGlobalOption did not answer OK")
            now = c.call("aria2.getGlobalOption", t).get("max-overall-download-limit")
            expect(now == "10485760", f"read back max-overall-download-limit {now!r}, want '10485760'")
            expect(c.call("aria2.changeGlobalOption", t, {"max-overall-download-limit": before}) == "OK",
                   "restoring did not answer OK")
        self.check(f"{n} aria2.changeGlobalOption (read back, restored)", change_global_option)

        # ---- a download that completes
        out = f"{label}-small.bin"

        def add_uri():
            gid = c.call("aria2.addUri", t, [self.base + "/small.bin"],
                         {"out": out, "split": "1", "max-connection-per-server": "1"}, 0)
            expect(isinstance(gid, str) and GID.fullmatch(gid), f"gid {short(gid)}")
            return gid
        small = self.check(f"{n} aria2.addUri (options, position 0)", add_uri)
        if small:
            done = self.check(f"{n} download completes", self.wait, c, small, {"complete"}, "small.bin")

            def tell_status_keys():
                keys = ["gid", "status", "totalLength", "completedLength", "files"]
                result = self.status(c, small, keys)
                expect(sorted(result) == sorted(keys), f"keys {sorted(result)}, want {sorted(keys)}")
                expect(result["gid"] == small and result["status"] == "complete", short(result))
                size = str(len(self.small))
                expect(result["totalLength"] == size and result["completedLength"] == size,
                       f"totalLength {result['totalLength']!r}, completedLength {result['completedLength']!r}, "
                       f"want {size!r}")
                expect(isinstance(result["files"], list) and result["files"], f"files {short(result['files'])}")
            self.check(f"{n} aria2.tellStatus (keys)", tell_status_keys)
            if done:
                self.check(f"{n} downloaded bytes equal the served file", self.check_file, c, small)

            def get_option():
                options = c.call("aria2.getOption", t, small)
                expect(isinstance(options, dict), f"not a struct: {short(options)}")
                expect(options.get("out") == out, f"out {short(options.get('out'))}, want {out!r}")
                expect("dir" in options, "no dir")
                bad = {k: v for k, v in options.items() if not isinstance(v, str)}
                expect(not bad, f"values not strings: {short(bad)}")
            self.check(f"{n} aria2.getOption", get_option)

            def tell_stopped():
                stopped = c.call("aria2.tellStopped", t, 0, 1000, ["gid", "status"])
                expect(isinstance(stopped, list), f"not a list: {short(stopped)}")
                mine = [s for s in stopped if isinstance(s, dict) and s.get("gid") == small]
                expect(mine == [{"gid": small, "status": "complete"}], f"{short(stopped)}")
            self.check(f"{n} aria2.tellStopped", tell_stopped)

        # ---- addMetalink with a <base64> document
        meta_name = f"{label}-meta.bin"
        metalink = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<metalink xmlns="urn:ietf:params:xml:ns:metalink">\n'
            f'  <file name="{meta_name}">\n'
            f'    <size>{len(self.small)}</size>\n'
            f'    <hash type="sha-256">{hashlib.sha256(self.small).hexdigest()}</hash>\n'
            f'    <url>{self.base}/small.bin</url>\n'
            '  </file>\n'
            '</metalink>\n').encode()

        def add_metalink():
            gids = c.call("aria2.addMetalink", t, c.binary(metalink))
            expect(isinstance(gids, list) and len(gids) == 1 and isinstance(gids[0], str) and GID.fullmatch(gids[0]),
                   f"answered {short(gids)}, want a list of one gid")
            return gids[0]
        meta = self.check(f"{n} aria2.addMetalink (Binary)", add_metalink)
        if meta and self.check(f"{n} metalink download completes", self.wait, c, meta, {"complete"}, "metalink"):
            def metalink_file():
                path = self.check_file(c, meta)
                expect(os.path.basename(path) == meta_name, f"saved as {path}, want the name {meta_name}")
            self.check(f"{n} metalink bytes equal the served file", metalink_file)

        # ---- the queue: one active download (never answered), one waiting behind it
        stall = StallServer()
        mcd = global_options.get("max-concurrent-downloads", "5")
        active = waiting = None
        try:
            def one_at_a_time():
                expect(c.call("aria2.changeGlobalOption", t, {"max-concurrent-downloads": "1"}) == "OK", "not OK")
                now = c.call("aria2.getGlobalOption", t).get("max-concurrent-downloads")
                expect(now == "1", f"read back max-concurrent-downloads {now!r}")
            self.check(f"{n} aria2.changeGlobalOption max-concurrent-downloads=1", one_at_a_time)

            def add_active():
                gid = c.call("aria2.addUri", t, [f"http://127.0.0.1:{stall.port}/stalled.bin"],
                             {"out": f"{label}-stalled.bin"})
                expect(isinstance(gid, str) and GID.fullmatch(gid), f"gid {short(gid)}")
                self.wait(c, gid, {"active"}, "stalled download")
                return gid
            active = self.check(f"{n} a download becomes active", add_active)

            def tell_active():
                result = c.call("aria2.tellActive", t, ["gid", "status"])
                expect(isinstance(result, list), f"not a list: {short(result)}")
                expect({"gid": active, "status": "active"} in result, f"{short(result)} lacks {active}")
            if active:
                self.check(f"{n} aria2.tellActive", tell_active)

            def add_waiting():
                gid = c.call("aria2.addUri", t, [self.base + "/small.bin"], {"out": f"{label}-waiting.bin"})
                expect(isinstance(gid, str) and GID.fullmatch(gid), f"gid {short(gid)}")
                return gid
            if active:
                waiting = self.check(f"{n} aria2.addUri behind the active one", add_waiting)

            def in_waiting(status):
                result = c.call("aria2.tellWaiting", t, 0, 100, ["gid", "status"])
                expect(isinstance(result, list), f"not a list: {short(result)}")
                expect({"gid": waiting, "status": status} in result,
                       f"tellWaiting {short(result)} lacks {waiting} as {status}")

            def pause():
                expect(c.call("aria2.pause", t, waiting) == waiting, "pause did not answer the gid")
                status = self.status(c, waiting)["status"]
                expect(status == "paused", f"status {status!r} after pause")
                in_waiting("paused")

            def unpause():
                expect(c.call("aria2.unpause", t, waiting) == waiting, "unpause did not answer the gid")
                status = self.status(c, waiting)["status"]
                expect(status == "waiting", f"status {status!r} after unpause")

            def remove():
                expect(c.call("aria2.remove", t, waiting) == waiting, "remove did not answer the gid")
                result = c.call("aria2.tellWaiting", t, 0, 100, ["gid"])
                expect({"gid": waiting} not in result, f"still waiting: {short(result)}")

            if waiting:
                self.check(f"{n} aria2.tellWaiting (waiting)", in_waiting, "waiting")
                self.check(f"{n} aria2.pause (waiting download)", pause)
                self.check(f"{n} aria2.unpause", unpause)
                self.check(f"{n} aria2.remove (waiting download)", remove)

            def force_remove():
                expect(c.call("aria2.forceRemove", t, active) == active, "forceRemove did not answer the gid")
                deadline = time.monotonic() + DOWNLOAD_DEADLINE
                while True:
                    try:
                        status = self.status(c, active)["status"]
                    except Fault:
                        return  # forgotten already
                    if status == "removed":
                        return
                    expect(time.monotonic() < deadline, f"still {status!r} after {DOWNLOAD_DEADLINE:.0f} s")
                    time.sleep(0.2)
            if active:
                self.check(f"{n} aria2.forceRemove (active download)", force_remove)
        finally:
            for gid in (waiting, active):  # leave nothing behind on the daemon, whatever failed
                if gid:
                    try:
                        c.call("aria2.forceRemove", t, gid)
                    except Exception:
                        pass
            try:
                c.call("aria2.changeGlobalOption", t, {"max-concurrent-downloads": mcd})
            except Exception as error:
                self.fail(f"{n} restore max-concurrent-downloads", str(error))
            stall.close()

        # ---- system.multicall
        if c.multicall:
            def multicall_helper():
                results = c.multicall([("aria2.getVersion", [t]),
                                       ("aria2.tellStatus", [t, small or UNKNOWN_GID, ["status"]]),
                                       ("aria2.tellStatus", [t, UNKNOWN_GID])])
                expect(results[0][0] == "ok" and isinstance(results[0][1], dict) and "version" in results[0][1],
                       f"entry 0: {short(results[0])}")
                expect(results[1] == ("ok", {"status": "complete"}), f"entry 1: {short(results[1])}")
                expect(results[2][0] == "fault" and results[2][1] == 1 and isinstance(results[2][2], str),
                       f"entry 2: {short(results[2])}, want a fault with faultCode 1")
            self.check(f"{n} xmlrpc.client.MultiCall (one failing entry)", multicall_helper)

        def multicall_structs():
            result = c.call("system.multicall", [
                {"methodName": "aria2.getGlobalStat", "params": [t]},
                {"methodName": "aria2.noSuchMethod", "params": [t]},
                {"methodName": "aria2.tellActive", "params": ["token:wrong"]},
                {"methodName": "system.listNotifications", "params": []},
            ])
            expect(isinstance(result, list) and len(result) == 4, f"{short(result)}")
            first = result[0]
            expect(isinstance(first, list) and len(first) == 1 and isinstance(first[0], dict)
                   and "numActive" in first[0], f"entry 0 (a result wrapped in a list): {short(first)}")
            expect(result[1] == {"faultCode": 1, "faultString": "No such method: aria2.noSuchMethod"},
                   f"entry 1: {short(result[1])}")
            expect(result[2] == {"faultCode": 1, "faultString": "Unauthorized"}, f"entry 2: {short(result[2])}")
            expect(result[3] == [ARIA2_NOTIFICATIONS], f"entry 3: {short(result[3])}")
        self.check(f"{n} system.multicall (struct list, failing entries)", multicall_structs)

        # ---- tokens
        self.check(f"{n} wrong token: Fault 1 Unauthorized", self.expect_fault, c, "wrong token",
                   "aria2.tellActive", "token:wrong", ["gid"], string="Unauthorized")
        self.check(f"{n} missing token: Fault 1 Unauthorized", self.expect_fault, c, "missing token",
                   "aria2.getGlobalStat", string="Unauthorized")
        self.check(f"{n} unknown method: Fault 1", self.expect_fault, c, "unknown method",
                   "aria2.noSuchMethod", t, string="No such method: aria2.noSuchMethod")

    def run(self):
        for make in (StdlibClient, AioClient):
            client = make(self.args.url)
            try:
                self.scenario(client)
            finally:
                client.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="the daemon's XML-RPC URL, http://127.0.0.1:PORT/rpc")
    parser.add_argument("--secret", required=True, help="the daemon's --rpc-secret")
    parser.add_argument("--base-url", required=True, help="an HTTP server serving small.bin")
    parser.add_argument("--deadline", type=int, default=300, help="give up after this many seconds (default 300)")
    args = parser.parse_args()
    if IMPORT_ERROR is not None:
        print(f"xmlrpc_check: cannot import the PyPI XML-RPC client aiohttp-xmlrpc ({IMPORT_ERROR!r}); install it "
              f"with: python3 -m pip install aiohttp-xmlrpc==1.5.0", file=sys.stderr)
        return 2
    checker = Checker(args)

    def out_of_time(*_):
        raise Deadline(f"the run took longer than {args.deadline} s")
    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(args.deadline)
    try:
        checker.run()
    except Deadline as error:
        checker.fail("deadline", str(error))
    finally:
        signal.alarm(0)
    print(f"{checker.passed} passed, {checker.failed} failed")
    return 1 if checker.failed else 0


if __name__ == "__main__":
    sys.exit(main())
