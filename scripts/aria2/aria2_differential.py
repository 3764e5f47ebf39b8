#!/usr/bin/env python3
"""Differential test of `downpour daemon` against aria2's own JSON-RPC server (`aria2c --enable-rpc`).

Both daemons are started side by side (random free loopback ports, a temporary directory each, the same
secret), the same scripted scenario of JSON-RPC calls is made on both, and every answer is compared: success
against error, error code and message, HTTP status, the key sets of results (recursively, through lists of
structs) and the format of every value (JSON string, number, list, struct; strings of decimal digits,
"true"/"false", 16-hex GIDs, empty strings). Values that differ by nature (GIDs, paths under the temporary
directories, speeds, progress, versions, session ids) are compared by format only; the rest by value.

Each difference has a stable identifier, `LABEL: KIND[: PATH]`, for instance

    getGlobalOption: key missing in downpour: bt-max-peers
    getOption(paused): value differs: split
    changeOption(bad value): error message differs
    getVersion: item missing in downpour: enabledFeatures: BitTorrent
    tellStatus(complete): value format differs: files[].uris[].status

LABEL names the call in the scenario; PATH is a key path in the result (`[]` stands for any element of a
list).

A pass of XML-RPC calls (`POST /rpc`, as xmlrpc.client writes them) goes through the same comparison: each
answer is parsed with xmlrpc.client.loads, a result taken as {"result": value} and a <fault> as
{"error": {"code": faultCode, "message": faultString}}; the HTTP status and the Content-Type are compared too
(`Content-Type differs`). Their labels start with `xmlrpc `, e.g. `xmlrpc getOption(paused): value differs: split`,
and `answer is not XML-RPC in downpour` stands where a JSON row would say `answer is not JSON in downpour`. A line
that allows a difference of a JSON-RPC call allows the same difference of its XML-RPC row; what only XML-RPC shows
is listed with the `xmlrpc ` label.

The differences file (default docs/aria2-differences.tsv) allows some: one line per identifier or glob, a TAB,
and the reason; `#` starts a comment line. In a glob, `*` matches any run of characters and nothing else is special
(so `getOption*: key missing in downpour: bt-*` covers a family).

Exit status: 0 when every difference is allowed and every line of the differences file matched at least one
difference; 1 otherwise (each new difference and each stale line is printed); 2 when the test itself could not
run (a daemon did not start, a download did not finish in time, a malformed differences file).

Usage:
  aria2_differential.py --downpour BINARY --base-url URL [--differences FILE] [--report]
  aria2_differential.py --check-docs docs/rpc.md [--differences FILE]
  aria2_differential.py --write-docs docs/rpc.md [--differences FILE]

BASE-URL serves `small.bin` (a small file, fast), `slow.bin` (long enough to stay active for the whole run:
rate-limited) and has no `missing.bin` (404). scripts/aria2/aria2-differential.sh sets that up with nginx.
"""

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import xmlrpc.client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from ports import free_port  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XML_LABEL_PREFIX = "xmlrpc "  # the labels of the XML-RPC rows
DEFAULT_DIFFERENCES = os.path.join(REPO, "docs", "aria2-differences.tsv")
BEGIN_MARKER = "<!-- aria2-differences:begin -->"
END_MARKER = "<!-- aria2-differences:end -->"

START_DEADLINE = 20.0  # seconds for a daemon to answer its first call
DOWNLOAD_DEADLINE = 90.0  # seconds for a download to reach a state (complete, error, active, paused)
CONNECT_GRACE = 10.0  # seconds an active download may take to open a connection (then compared as it is)
CALL_TIMEOUT = 20.0  # seconds for one HTTP exchange (a wrong token is answered after ~1 s)
STOP_DEADLINE = 5.0  # seconds after SIGTERM before SIGKILL

# Keys whose values differ by nature between two runs: compared by format only.
VOLATILE_KEYS = {
    "gid", "downloadSpeed", "uploadSpeed", "completedLength", "uploadLength", "connections", "bitfield",
    "sessionId", "version", "verifiedLength", "numSeeders", "rpc-listen-port", "currentUri",
}
# Lists whose length depends on timing (connections open at the moment): only empty against not empty counts.
VOLATILE_LENGTHS = {"[].servers"}


class TestError(Exception):
    """The test could not run (exit 2), as opposed to a difference found (exit 1)."""


# ------------------------------------------------------------------------------------------ placeholders
# Parameters are written once for both daemons; these stand for what differs between them.

class Token:
    def __repr__(self):
        return "TOKEN"


TOKEN = Token()


class Gid:
    """The GID a daemon gave to the download named `name` (optionally a prefix of it, or upper-cased). With a
    fallback, a daemon whose add failed gets the fallback instead of stopping the test (the XML-RPC pass)."""

    def __init__(self, name, length=16, upper=False, fallback=None):
        self.name, self.length, self.upper, self.fallback = name, length, upper, fallback


class Dir:
    """A directory under the daemon's download directory."""

    def __init__(self, sub):
        self.sub = sub


class Shared:
    """A value computed once from both daemons (e.g. a GID prefix that matches no download in either)."""

    def __init__(self, key):
        self.key = key


# ------------------------------------------------------------------------------------------ daemons


class Answer:
    def __init__(self, status, body, text):
        self.status, self.body, self.text = status, body, text

    def result(self):
        if isinstance(self.body, dict) and "result" in self.body:
            return self.body["result"]
        return None

    def describe(self):
        return f"HTTP {self.status} {self.text[:300]}"


class XmlAnswer(Answer):
    def __init__(self, status, body, text, content_type):
        super().__init__(status, body, text)
        self.content_type = content_type


class Daemon:
    name = "?"

    def __init__(self, work, secret):
        self.root = os.path.join(work, self.name)
        self.download_dir = os.path.join(self.root, "dl")
        self.home = os.path.join(self.root, "home")
        for path in (self.download_dir, self.home):
            os.makedirs(path)
        self.secret = secret
        self.port = None
        self.proc = None
        self.gids = {}

    def env(self):
        env = dict(os.environ)
        env.update(HOME=self.home, XDG_CONFIG_HOME=os.path.join(self.home, ".config"),
                   XDG_CACHE_HOME=os.path.join(self.home, ".cache"),
                   XDG_STATE_HOME=os.path.join(self.home, ".state"),
                   XDG_DATA_HOME=os.path.join(self.home, ".local", "share"))
        return env

    def log_tail(self):
        chunks = []
        for name in sorted(os.listdir(self.root)):
            path = os.path.join(self.root, name)
            if name.endswith(".log") and os.path.isfile(path):
                with open(path, "rb") as handle:
                    data = handle.read()[-2000:].decode("utf-8", "replace")
                chunks.append(f"--- {self.name} {name}:\n{data}")
        return "\n".join(chunks)

    def stop(self):
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_DEADLINE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_DEADLINE)

    def post(self, body):
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/jsonrpc", data=body, method="POST",
            headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=CALL_TIMEOUT) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        except (urllib.error.URLError, OSError) as error:
            raise TestError(f"{self.name}: no answer from the daemon: {error}\n{self.log_tail()}") from error
        text = raw.decode("utf-8", "replace")
        try:
            body = json.loads(text) if text else None
        except ValueError:
            body = None
        return Answer(status, body, text)

    def request(self, method, params, ident="poll"):
        body = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
        return self.post(json.dumps(body).encode())

    def post_xml(self, body):
        """POST /rpc (XML-RPC). The answer's body is put in JSON-RPC's shape so that one comparison serves both:
        {"result": value} or, for a <fault>, {"error": {"code": faultCode, "message": faultString}}; None when it
        is not an XML-RPC answer. A connection closed without an answer is an answer too (status 0): this daemon
        may not speak XML-RPC yet."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/rpc", data=body, method="POST", headers={"Content-Type": "text/xml"})
        try:
            with urllib.request.urlopen(request, timeout=CALL_TIMEOUT) as response:
                status, raw, content_type = response.status, response.read(), response.headers.get("Content-Type")
        except urllib.error.HTTPError as error:
            status, raw, content_type = error.code, error.read(), error.headers.get("Content-Type")
        except (urllib.error.URLError, OSError) as error:
            if self.proc.poll() is not None:
                raise TestError(f"{self.name}: the daemon exited: {error}\n{self.log_tail()}") from error
            return XmlAnswer(0, None, f"(no answer: {error})", None)
        text = raw.decode("utf-8", "replace")
        try:
            params, _ = xmlrpc.client.loads(raw)
            parsed = {"result": params[0]} if len(params) == 1 else None
        except xmlrpc.client.Fault as fault:
            parsed = {"error": {"code": fault.faultCode, "message": fault.faultString}}
        except Exception:  # not XML, not an XML-RPC answer
            parsed = None
        return XmlAnswer(status, parsed, text, content_type)

    def wait_until_answers(self, deadline):
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                answer = self.request("aria2.getGlobalOption", ["token:" + self.secret])
            except TestError:
                time.sleep(0.1)
                continue
            options = answer.result()
            if answer.status == 200 and isinstance(options, dict):
                if options.get("dir") != self.download_dir:
                    raise TestError(f"{self.name}: port {self.port} answers for another daemon (dir "
                                    f"{options.get('dir')!r})")
                return True
            time.sleep(0.1)
        raise TestError(f"{self.name}: did not answer within {START_DEADLINE:.0f} s\n{self.log_tail()}")


class Aria2(Daemon):
    name = "aria2"

    def __init__(self, work, secret, binary):
        super().__init__(work, secret)
        self.binary = binary

    def start(self):
        for _attempt in range(5):
            self.port = free_port()
            log = open(os.path.join(self.root, "aria2c.log"), "ab")
            try:
                self.proc = subprocess.Popen(
                    [self.binary, "--no-conf", "--enable-rpc", f"--rpc-listen-port={self.port}",
                     "-d", self.download_dir, f"--rpc-secret={self.secret}"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self.env(),
                    cwd=self.root)
            finally:
                log.close()
            if self.wait_until_answers(time.monotonic() + START_DEADLINE):
                return
            self.proc.wait()
            self.proc = None  # exited: most likely the port was taken meanwhile; another one
        raise TestError(f"aria2c did not start\n{self.log_tail()}")


class Downpour(Daemon):
    name = "downpour"

    def __init__(self, work, secret, binary):
        super().__init__(work, secret)
        self.binary = binary

    def start(self):
        state = os.path.join(self.root, "state")
        os.makedirs(state)
        out_path = os.path.join(self.root, "stdout.log")
        with open(out_path, "wb") as out, open(os.path.join(self.root, "stderr.log"), "wb") as err:
            self.proc = subprocess.Popen(
                [self.binary, "daemon", "--no-conf", "--rpc-listen-port", "0", "-d", self.download_dir, "--state-dir", state,
                 "--rpc-secret", self.secret],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=self.env(), cwd=self.root)
        deadline = time.monotonic() + START_DEADLINE
        while time.monotonic() < deadline:
            with open(out_path, "rb") as handle:
                match = re.search(rb"http://127\.0\.0\.1:(\d+)/jsonrpc", handle.read())
            if match:
                self.port = int(match.group(1))
                if self.wait_until_answers(deadline):
                    return
            if self.proc.poll() is not None:
                raise TestError(f"downpour exited with {self.proc.returncode}\n{self.log_tail()}")
            time.sleep(0.05)
        raise TestError(f"downpour did not say where it listens within {START_DEADLINE:.0f} s\n{self.log_tail()}")


# ------------------------------------------------------------------------------------------ comparison

def value_format(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "JSON boolean"
    if isinstance(value, (int, float)):
        return "JSON number"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "struct"
    if value == "":
        return "empty string"
    if value in ("true", "false"):
        return "\"true\"/\"false\" string"
    # Sixteen hexadecimal digits are a GID first: a random GID is all decimal digits now and then (aria2c gave
    # "4328708191529854" in one run), and no number these calls answer has sixteen digits.
    if re.fullmatch(r"<gid:[^>]*>|[0-9a-f]{16}", value):
        return "GID string"
    if re.fullmatch(r"[0-9]+", value):
        return "decimal-digit string"
    return "string"


def short(value):
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 200 else text[:197] + "..."


def join(path, key):
    return f"{path}.{key}" if path else key


def last_key(path):
    return re.split(r"[.\[\]]+", path.rstrip("[]"))[-1] if path else ""


class Differences:
    def __init__(self):
        self.found = {}  # identifier -> detail (the first one seen)

    def add(self, label, kind, path=None, detail=""):
        identifier = f"{label}: {kind}" + (f": {path}" if path else "")
        self.found.setdefault(identifier, detail)

    def compare_answers(self, label, a, d, indexed=False, kind="JSON"):
        if a.status != d.status:
            self.add(label, "HTTP status differs", detail=f"aria2 {a.status}, downpour {d.status}")
        if a.body is None or d.body is None:
            if (a.body is None) != (d.body is None) or a.text != d.text:
                self.add(label, f"answer is not {kind} in " + ("both" if a.body is None and d.body is None else
                                                             "aria2" if a.body is None else "downpour"),
                         detail=f"aria2 {a.describe()}; downpour {d.describe()}")
            return
        self.compare_envelope(label, a.body, d.body, indexed)

    def compare_envelope(self, label, a, d, indexed):
        if isinstance(a, list) and isinstance(d, list):
            if len(a) != len(d):
                self.add(label, "batch length differs", detail=f"aria2 {len(a)}, downpour {len(d)}")
            for i, (x, y) in enumerate(zip(a, d)):
                self.compare_envelope(f"{label}[{i}]", x, y, indexed)
            return
        if not (isinstance(a, dict) and isinstance(d, dict)):
            self.add(label, "answer kind differs", detail=f"aria2 {short(a)}; downpour {short(d)}")
            return
        for key in sorted(set(a) - set(d) - {"result", "error"}):
            self.add(label, "envelope key missing in downpour", key, short(a[key]))
        for key in sorted(set(d) - set(a) - {"result", "error"}):
            self.add(label, "extra envelope key in downpour", key, short(d[key]))
        if a.get("id") != d.get("id"):
            self.add(label, "envelope id differs", detail=f"aria2 {short(a.get('id'))}, downpour {short(d.get('id'))}")
        error_a, error_d = "error" in a, "error" in d
        if error_a and not error_d:
            self.add(label, "error in aria2 only", detail=f"aria2 {short(a['error'])}; downpour {short(d.get('result'))}")
        elif error_d and not error_a:
            self.add(label, "error in downpour only", detail=f"aria2 {short(a.get('result'))}; downpour {short(d['error'])}")
        elif error_a and error_d:
            self.compare_error(label, a["error"], d["error"])
        else:
            self.compare_value(label, a.get("result"), d.get("result"), "", indexed)

    def compare_error(self, label, a, d):
        if not (isinstance(a, dict) and isinstance(d, dict)):
            self.add(label, "error format differs", detail=f"aria2 {short(a)}; downpour {short(d)}")
            return
        if a.get("code") != d.get("code"):
            self.add(label, "error code differs", detail=f"aria2 {short(a.get('code'))}, downpour {short(d.get('code'))}"
                     f" (aria2 message {short(a.get('message'))})")
        if a.get("message") != d.get("message"):
            self.add(label, "error message differs",
                     detail=f"aria2 {short(a.get('message'))}; downpour {short(d.get('message'))}")
        for key in sorted(set(a) - set(d)):
            self.add(label, "error key missing in downpour", key)
        for key in sorted(set(d) - set(a)):
            self.add(label, "extra error key in downpour", key)

    def compare_value(self, label, a, d, path, indexed=False):
        where = path or "(result)"
        format_a, format_d = value_format(a), value_format(d)
        if format_a != format_d:
            self.add(label, "value format differs", where,
                     f"aria2 {format_a} {short(a)}; downpour {format_d} {short(d)}")
            return
        if isinstance(a, dict):
            for key in sorted(set(a) - set(d)):
                self.add(label, "key missing in downpour", join(path, key), f"aria2 {short(a[key])}")
            for key in sorted(set(d) - set(a)):
                self.add(label, "extra key in downpour", join(path, key), f"downpour {short(d[key])}")
            for key in a:
                if key in d:
                    self.compare_value(label, a[key], d[key], join(path, key))
            return
        if isinstance(a, list):
            self.compare_list(label, a, d, path, indexed)
            return
        if a != d and last_key(path) not in VOLATILE_KEYS and format_a != "GID string":
            self.add(label, "value differs", where, f"aria2 {short(a)}; downpour {short(d)}")

    def compare_list(self, label, a, d, path, indexed):
        where = path or "(result)"
        items = a + d
        if not indexed and items and all(isinstance(x, str) for x in items):
            if last_key(path) in VOLATILE_KEYS or a == d:
                return
            prefix = f"{path}: " if path else ""
            for item in [x for x in a if x not in d]:
                self.add(label, "item missing in downpour", prefix + item)
            for item in [x for x in d if x not in a]:
                self.add(label, "extra item in downpour", prefix + item)
            if sorted(a) == sorted(d):
                self.add(label, "order differs", where, f"aria2 {short(a)}; downpour {short(d)}")
            elif set(a) == set(d):
                self.add(label, "repeated items differ", where, f"aria2 {short(a)}; downpour {short(d)}")
            return
        if path in VOLATILE_LENGTHS:
            if bool(a) != bool(d):
                self.add(label, f"list empty in {'downpour' if a else 'aria2'} only", where,
                         f"aria2 {short(a)}; downpour {short(d)}")
        elif len(a) != len(d):
            self.add(label, "list length differs", where, f"aria2 {len(a)}, downpour {len(d)}")
        for i, (x, y) in enumerate(zip(a, d)):
            self.compare_value(label, x, y, f"{path}[{i}]" if indexed else f"{path}[]")


# ------------------------------------------------------------------------------------------ the runner

class Runner:
    def __init__(self, aria2, downpour, base_url):
        self.daemons = (aria2, downpour)
        self.base_url = base_url.rstrip("/")
        self.differences = Differences()
        self.labels = set()
        self.shared = {}
        self.calls = 0
        self.dump = None

    def url(self, name):
        return f"{self.base_url}/{name}"

    def resolve(self, daemon, value):
        if value is TOKEN:
            return "token:" + daemon.secret
        if isinstance(value, Gid):
            gid = daemon.gids.get(value.name, value.fallback)
            if gid is None:
                raise TestError(f"{daemon.name}: no download named {value.name!r} (its add failed)")
            gid = gid[: value.length]
            return gid.upper() if value.upper else gid
        if isinstance(value, Dir):
            return os.path.join(daemon.download_dir, value.sub)
        if isinstance(value, Shared):
            return self.shared[value.key]
        if isinstance(value, list):
            return [self.resolve(daemon, x) for x in value]
        if isinstance(value, dict):
            return {k: self.resolve(daemon, v) for k, v in value.items()}
        return value

    def normalize(self, daemon, value):
        if isinstance(value, str):
            value = value.replace(daemon.root, "<TMP>")
            for name, gid in daemon.gids.items():
                value = re.sub(re.escape(gid), f"<gid:{name}>", value, flags=re.IGNORECASE)
            return value
        if isinstance(value, list):
            return [self.normalize(daemon, x) for x in value]
        if isinstance(value, dict):
            return {k: self.normalize(daemon, v) for k, v in value.items()}
        return value

    def claim(self, label):
        if label in self.labels:
            raise TestError(f"the scenario uses the label {label!r} twice")
        self.labels.add(label)

    def exchange(self, label, send, indexed=False):
        """send(daemon) -> Answer, on both; compares the normalized answers. Returns both raw answers."""
        self.claim(label)
        self.calls += 1
        raw = [send(daemon) for daemon in self.daemons]
        normalized = []
        for daemon, answer in zip(self.daemons, raw):
            body = self.normalize(daemon, answer.body)
            normalized.append(Answer(answer.status, body, self.normalize(daemon, answer.text)))
        self.differences.compare_answers(label, normalized[0], normalized[1], indexed)
        if self.dump:
            record = {"label": label}
            for daemon, answer in zip(self.daemons, normalized):
                record[daemon.name] = {"status": answer.status, "body": answer.body if answer.body is not None
                                       else answer.text}
            self.dump.write(json.dumps(record, ensure_ascii=False) + "\n")
        return raw

    def call(self, label, method, params, indexed=False):
        return self.exchange(label, lambda d: d.request(method, self.resolve(d, params), str(self.calls)), indexed)

    def raw(self, label, body):
        """body: bytes as they are, or a JSON value (placeholders resolved) to encode."""
        if isinstance(body, bytes):
            return self.exchange(label, lambda d: d.post(body))
        return self.exchange(label, lambda d: d.post(json.dumps(self.resolve(d, body)).encode()))

    def xml_exchange(self, label, body, indexed=False):
        """XML-RPC at /rpc: body(daemon) -> bytes, on both; compares the answers like JSON ones (label prefixed
        `xmlrpc `), and their Content-Type."""
        label = XML_LABEL_PREFIX + label
        self.claim(label)
        self.calls += 1
        raw = [daemon.post_xml(body(daemon)) for daemon in self.daemons]
        normalized = [Answer(a.status, self.normalize(d, a.body), self.normalize(d, a.text))
                      for d, a in zip(self.daemons, raw)]
        self.differences.compare_answers(label, normalized[0], normalized[1], indexed, kind="XML-RPC")
        if raw[0].content_type != raw[1].content_type:
            self.differences.add(label, "Content-Type differs",
                                 detail=f"aria2 {raw[0].content_type!r}, downpour {raw[1].content_type!r}")
        if self.dump:
            record = {"label": label}
            for daemon, answer, original in zip(self.daemons, normalized, raw):
                record[daemon.name] = {"status": answer.status, "content-type": original.content_type,
                                       "body": answer.body if answer.body is not None else answer.text}
            self.dump.write(json.dumps(record, ensure_ascii=False) + "\n")
        return raw

    def xml_call(self, label, method, params, indexed=False, int_tag="int"):
        """An XML-RPC call as xmlrpc.client writes it (integers as <int>, or as <i4> with int_tag="i4")."""
        def body(daemon):
            text = xmlrpc.client.dumps(tuple(self.resolve(daemon, params)), method)
            if int_tag != "int":
                text = text.replace("<int>", f"<{int_tag}>").replace("</int>", f"</{int_tag}>")
            return text.encode()
        return self.xml_exchange(label, body, indexed)

    def xml_add(self, label, name, params):
        """addUri over XML-RPC; a daemon that gives no GID is only a difference (Gid(name, fallback=...) then)."""
        answers = self.xml_call(label, "aria2.addUri", params)
        for daemon, answer in zip(self.daemons, answers):
            gid = answer.result()
            if isinstance(gid, str):
                daemon.gids[name] = gid
        return answers

    def add(self, label, name, params):
        answers = self.call(label, "aria2.addUri", params)
        for daemon, answer in zip(self.daemons, answers):
            gid = answer.result()
            if not isinstance(gid, str):
                raise TestError(f"{daemon.name}: {label} failed: {answer.describe()}")
            daemon.gids[name] = gid
        return answers

    def status_of(self, daemon, name):
        answer = daemon.request("aria2.tellStatus",
                                ["token:" + daemon.secret, daemon.gids[name], ["status", "totalLength", "connections"]])
        result = answer.result()
        if not isinstance(result, dict):
            raise TestError(f"{daemon.name}: tellStatus of {name} failed: {answer.describe()}")
        return result

    def wait(self, name, statuses, known_length=False, connected=False):
        """Waits (on both daemons, DOWNLOAD_DEADLINE at most) until download `name` has one of `statuses`
        (and, with known_length, a totalLength other than 0). With connected, then waits a little longer
        (CONNECT_GRACE at most, not an error) until it has a connection open, so that what is compared
        next is a download that is transferring on both sides."""
        for daemon in self.daemons:
            deadline = time.monotonic() + DOWNLOAD_DEADLINE
            while True:
                status = self.status_of(daemon, name)
                if status.get("status") in statuses and (not known_length or status.get("totalLength") not in ("0", None)):
                    break
                if time.monotonic() > deadline:
                    raise TestError(f"{daemon.name}: download {name} is still {status} after "
                                    f"{DOWNLOAD_DEADLINE:.0f} s (waited for {sorted(statuses)})\n{daemon.log_tail()}")
                time.sleep(0.1)
        if connected:
            for daemon in self.daemons:
                grace = time.monotonic() + CONNECT_GRACE
                while self.status_of(daemon, name).get("connections") in ("0", None) and time.monotonic() < grace:
                    time.sleep(0.1)

    def settle(self, seconds=0.3):
        time.sleep(seconds)


# ------------------------------------------------------------------------------------------ the scenario

T = TOKEN
UNKNOWN_GID = "0123456789abcdef"
TELL_KEYS = ["gid", "status", "totalLength", "dir", "files", "errorCode", "errorMessage", "noSuchKey"]
DONE = {"complete", "error", "removed"}


def scenario(r):
    # A fresh daemon.
    r.call("getVersion", "aria2.getVersion", [T])
    r.call("getSessionInfo", "aria2.getSessionInfo", [T])
    r.call("system.listMethods", "system.listMethods", [])
    r.call("system.listMethods(token)", "system.listMethods", [T])
    r.call("system.listNotifications", "system.listNotifications", [])
    r.call("getGlobalOption", "aria2.getGlobalOption", [T])
    r.call("getGlobalStat(empty)", "aria2.getGlobalStat", [T])
    r.call("tellActive(empty)", "aria2.tellActive", [T])
    r.call("tellWaiting(empty)", "aria2.tellWaiting", [T, 0, 10])
    r.call("tellStopped(empty)", "aria2.tellStopped", [T, 0, 10])
    r.call("saveSession", "aria2.saveSession", [T])

    # Global options.
    r.call("changeGlobalOption(good value)", "aria2.changeGlobalOption", [T, {"max-overall-download-limit": "10M"}])
    r.call("changeGlobalOption(bad value)", "aria2.changeGlobalOption", [T, {"max-overall-download-limit": "lots"}])
    r.call("changeGlobalOption(unknown name)", "aria2.changeGlobalOption", [T, {"no-such-option": "1"}])
    r.call("changeGlobalOption(not changeable)", "aria2.changeGlobalOption", [T, {"rpc-listen-port": "7000"}])
    r.call("changeGlobalOption(max-concurrent-downloads)", "aria2.changeGlobalOption",
           [T, {"max-concurrent-downloads": "1"}])
    r.call("changeGlobalOption(missing options)", "aria2.changeGlobalOption", [T])
    r.call("changeGlobalOption(options not a struct)", "aria2.changeGlobalOption", [T, "split=2"])
    r.call("getGlobalOption(after change)", "aria2.getGlobalOption", [T])

    # A paused download with options.
    options = {"pause": "true", "split": "2", "out": "paused.bin", "header": ["X-Diff-One: 1", "X-Diff-Two: 2"],
               "max-download-limit": "100K", "dir": Dir("sub")}
    r.add("addUri(paused, options)", "paused", [T, [r.url("slow.bin")], options])
    p = Gid("paused")
    r.call("tellStatus(paused)", "aria2.tellStatus", [T, p])
    r.call("tellStatus(paused, keys)", "aria2.tellStatus", [T, p, TELL_KEYS])
    r.call("tellStatus(paused, empty keys)", "aria2.tellStatus", [T, p, []])
    r.call("tellStatus(gid prefix)", "aria2.tellStatus", [T, Gid("paused", 10), ["gid", "status"]])
    r.call("tellStatus(upper-case gid)", "aria2.tellStatus", [T, Gid("paused", upper=True), ["gid", "status"]])
    r.call("getOption(paused)", "aria2.getOption", [T, p])
    r.call("getUris(paused)", "aria2.getUris", [T, p])
    r.call("getFiles(paused)", "aria2.getFiles", [T, p])
    r.call("getServers(paused)", "aria2.getServers", [T, p])
    r.call("getPeers(paused)", "aria2.getPeers", [T, p])
    r.call("tellWaiting(paused)", "aria2.tellWaiting", [T, 0, 10])
    r.call("tellWaiting(paused, keys)", "aria2.tellWaiting", [T, 0, 10, ["gid", "status", "noSuchKey"]])
    r.call("changeOption(good value)", "aria2.changeOption", [T, p, {"max-download-limit": "200K"}])
    r.call("changeOption(bad value)", "aria2.changeOption", [T, p, {"max-download-limit": "fast"}])
    r.call("changeOption(unknown name)", "aria2.changeOption", [T, p, {"no-such-option": "1"}])
    r.call("changeOption(missing options)", "aria2.changeOption", [T, p])
    r.call("changeOption(options not a struct)", "aria2.changeOption", [T, p, "split=2"])
    r.call("getOption(paused, after change)", "aria2.getOption", [T, p])
    r.call("pause(already paused)", "aria2.pause", [T, p])

    # A download that finishes, one that fails.
    r.add("addUri(small)", "small", [T, [r.url("small.bin")]])
    r.wait("small", DONE)
    s = Gid("small")
    r.call("tellStatus(complete)", "aria2.tellStatus", [T, s])
    r.call("tellStatus(complete, keys)", "aria2.tellStatus", [T, s, TELL_KEYS])
    r.call("getOption(complete)", "aria2.getOption", [T, s])
    r.call("getUris(complete)", "aria2.getUris", [T, s])
    r.call("getFiles(complete)", "aria2.getFiles", [T, s])
    r.call("getServers(complete)", "aria2.getServers", [T, s])
    r.call("changeOption(complete)", "aria2.changeOption", [T, s, {"max-download-limit": "200K"}])
    r.call("pause(complete)", "aria2.pause", [T, s])
    r.call("remove(complete)", "aria2.remove", [T, s])
    r.add("addUri(404)", "missing", [T, [r.url("missing.bin")]])
    r.wait("missing", DONE)
    m = Gid("missing")
    r.call("tellStatus(error)", "aria2.tellStatus", [T, m])
    r.call("tellStatus(error, keys)", "aria2.tellStatus", [T, m, TELL_KEYS])
    r.call("getFiles(error)", "aria2.getFiles", [T, m])
    r.call("getUris(error)", "aria2.getUris", [T, m])

    # The paused download runs.
    r.call("unpause(paused)", "aria2.unpause", [T, p])
    r.wait("paused", {"active"}, known_length=True, connected=True)
    r.call("unpause(active)", "aria2.unpause", [T, p])
    r.call("tellActive", "aria2.tellActive", [T])
    r.call("tellActive(keys)", "aria2.tellActive", [T, TELL_KEYS])
    r.call("tellStatus(active)", "aria2.tellStatus", [T, p])
    r.call("tellStatus(active, keys)", "aria2.tellStatus", [T, p, TELL_KEYS])
    r.call("getOption(active)", "aria2.getOption", [T, p])
    r.call("getUris(active)", "aria2.getUris", [T, p])
    r.call("getFiles(active)", "aria2.getFiles", [T, p])
    r.call("getServers(active)", "aria2.getServers", [T, p])
    r.call("getGlobalStat(one active)", "aria2.getGlobalStat", [T])

    # A waiting queue (max-concurrent-downloads is 1).
    for name in ("w1", "w2", "w3"):
        r.add(f"addUri({name})", name, [T, [r.url("small.bin")], {"out": f"{name}.bin"}])
    r.add("addUri(position 0)", "w0", [T, [r.url("small.bin")], {"out": "w0.bin"}, 0])
    r.call("tellWaiting(0,10)", "aria2.tellWaiting", [T, 0, 10])
    r.call("tellWaiting(0,10, keys)", "aria2.tellWaiting", [T, 0, 10, ["gid", "status", "files"]])
    r.call("tellWaiting(1,2)", "aria2.tellWaiting", [T, 1, 2, ["gid"]])
    r.call("tellWaiting(-1,2)", "aria2.tellWaiting", [T, -1, 2, ["gid"]])
    r.call("tellWaiting(0,0)", "aria2.tellWaiting", [T, 0, 0])
    r.call("tellWaiting(past the end)", "aria2.tellWaiting", [T, 10, 2])
    r.call("tellWaiting(negative num)", "aria2.tellWaiting", [T, 0, -1])
    r.call("changePosition(POS_SET)", "aria2.changePosition", [T, Gid("w3"), 0, "POS_SET"])
    r.call("changePosition(POS_CUR)", "aria2.changePosition", [T, Gid("w3"), 2, "POS_CUR"])
    r.call("changePosition(POS_END)", "aria2.changePosition", [T, Gid("w0"), 0, "POS_END"])
    r.call("changePosition(past the end)", "aria2.changePosition", [T, Gid("w1"), 99, "POS_SET"])
    r.call("changePosition(negative POS_CUR)", "aria2.changePosition", [T, Gid("w1"), -99, "POS_CUR"])
    r.call("changePosition(negative POS_SET)", "aria2.changePosition", [T, Gid("w1"), -1, "POS_SET"])
    r.call("changePosition(bad how)", "aria2.changePosition", [T, Gid("w1"), 0, "POS_NOWHERE"])
    r.call("changePosition(active)", "aria2.changePosition", [T, p, 0, "POS_SET"])
    r.call("changePosition(stopped)", "aria2.changePosition", [T, s, 0, "POS_SET"])
    r.call("tellWaiting(after changePosition)", "aria2.tellWaiting", [T, 0, 10, ["gid", "status"]])
    r.call("pause(waiting)", "aria2.pause", [T, Gid("w1")])
    r.call("tellStatus(paused waiting)", "aria2.tellStatus", [T, Gid("w1"), ["gid", "status"]])
    r.call("getOption(waiting)", "aria2.getOption", [T, Gid("w0")])
    r.call("getServers(waiting)", "aria2.getServers", [T, Gid("w0")])
    r.call("remove(waiting)", "aria2.remove", [T, Gid("w2")])
    r.settle()
    r.call("tellStatus(removed waiting)", "aria2.tellStatus", [T, Gid("w2")])
    r.call("remove(removed waiting)", "aria2.remove", [T, Gid("w2")])
    r.call("getGlobalStat(queue)", "aria2.getGlobalStat", [T])

    # The active one pauses; the waiting ones run and finish.
    r.call("pause(active)", "aria2.pause", [T, p])
    r.wait("paused", {"paused"})
    r.call("tellStatus(paused after active)", "aria2.tellStatus", [T, p])
    r.wait("w0", DONE)
    r.wait("w3", DONE)
    r.call("tellStopped(0,10)", "aria2.tellStopped", [T, 0, 10])
    r.call("tellStopped(0,10, keys)", "aria2.tellStopped", [T, 0, 10, ["gid", "status", "errorCode"]])
    r.call("tellStopped(-1,2)", "aria2.tellStopped", [T, -1, 2, ["gid"]])
    r.call("tellStopped(0,0)", "aria2.tellStopped", [T, 0, 0])
    r.call("tellStopped(negative num)", "aria2.tellStopped", [T, 0, -1])
    r.call("tellWaiting(end)", "aria2.tellWaiting", [T, 0, 10, ["gid", "status"]])
    r.call("getGlobalStat(after downloads)", "aria2.getGlobalStat", [T])
    r.call("removeDownloadResult(complete)", "aria2.removeDownloadResult", [T, s])
    r.call("removeDownloadResult(again)", "aria2.removeDownloadResult", [T, s])
    r.call("removeDownloadResult(not stopped)", "aria2.removeDownloadResult", [T, p])
    r.call("tellStatus(result removed)", "aria2.tellStatus", [T, s])
    r.call("purgeDownloadResult", "aria2.purgeDownloadResult", [T])
    r.call("tellStopped(after purge)", "aria2.tellStopped", [T, 0, 10])
    r.call("tellStatus(purged)", "aria2.tellStatus", [T, m])
    r.call("getGlobalStat(after purge)", "aria2.getGlobalStat", [T])

    # system.multicall.
    r.call("system.multicall", "system.multicall", [[
        {"methodName": "aria2.getSessionInfo", "params": [T]},
        {"methodName": "aria2.tellStatus", "params": [T, p, ["gid", "status"]]},
        {"methodName": "aria2.tellActive", "params": [T]},
        {"methodName": "aria2.tellWaiting", "params": [T, 0, 10, ["gid", "status"]]},
        {"methodName": "aria2.tellStatus", "params": [T, UNKNOWN_GID]},
        {"methodName": "aria2.noSuchMethod", "params": [T]},
        {"methodName": "aria2.tellActive", "params": ["token:wrong"]},
        {"methodName": "aria2.getGlobalStat"},
    ]], indexed=True)
    r.call("system.multicall(with token)", "system.multicall", [T, [{"methodName": "aria2.getSessionInfo",
                                                                    "params": [T]}]], indexed=True)
    r.call("system.multicall(entry not a struct)", "system.multicall", [[1, "x"]], indexed=True)
    r.call("system.multicall(missing methodName)", "system.multicall", [[{"params": [T]}]], indexed=True)
    r.call("system.multicall(params not a list)", "system.multicall",
           [[{"methodName": "aria2.getVersion", "params": "x"}]], indexed=True)
    r.call("system.multicall(nested)", "system.multicall",
           [[{"methodName": "system.multicall", "params": [[]]}]], indexed=True)
    r.call("system.multicall(empty)", "system.multicall", [[]], indexed=True)
    r.call("system.multicall(missing list)", "system.multicall", [], indexed=True)
    r.call("system.multicall(list not a list)", "system.multicall", ["x"], indexed=True)

    # Bad GIDs.
    known = [g for daemon in r.daemons for g in daemon.gids.values()]
    r.shared["short"] = next(c for c in (f"{i:03x}" for i in range(4096)) if not any(g.startswith(c) for g in known))
    bad_gids = [("unknown gid", UNKNOWN_GID), ("short gid", Shared("short")), ("non-hex gid", "zzzzzzzzzzzzzzzz"),
                ("long gid", UNKNOWN_GID + "0"), ("empty gid", "")]
    for description, gid in bad_gids:
        for method, extra in (("tellStatus", []), ("getOption", []), ("getUris", []), ("getFiles", []),
                              ("getServers", []), ("getPeers", []), ("pause", []), ("forcePause", []),
                              ("unpause", []), ("remove", []), ("forceRemove", []), ("removeDownloadResult", []),
                              ("changeOption", [{"max-download-limit": "1K"}]),
                              ("changePosition", [0, "POS_SET"])):
            r.call(f"{method}({description})", f"aria2.{method}", [T, gid] + extra)

    # Bad parameters.
    url = r.url("small.bin")
    r.call("tellStatus(gid not a string)", "aria2.tellStatus", [T, 123])
    r.call("tellStatus(gid missing)", "aria2.tellStatus", [T])
    r.call("tellStatus(keys not a list)", "aria2.tellStatus", [T, p, "status"])
    r.call("tellStatus(key not a string)", "aria2.tellStatus", [T, p, [1, "status"]])
    r.call("getOption(gid missing)", "aria2.getOption", [T])
    r.call("pause(gid not a string)", "aria2.pause", [T, ["x"]])
    r.call("tellWaiting(offset not a number)", "aria2.tellWaiting", [T, "0", 10])
    r.call("tellWaiting(num missing)", "aria2.tellWaiting", [T, 0])
    r.call("tellStopped(missing)", "aria2.tellStopped", [T])
    r.call("changePosition(pos not a number)", "aria2.changePosition", [T, Gid("w1"), "0", "POS_SET"])
    r.call("changePosition(how missing)", "aria2.changePosition", [T, Gid("w1"), 0])

    # Methods and tokens.
    r.call("unknown method", "aria2.noSuchMethod", [T])
    r.call("unknown method (no prefix)", "noSuchMethod", [T])
    r.call("unknown system method", "system.noSuchMethod", [])
    r.call("wrong token", "aria2.tellActive", ["token:wrong", ["gid"]])
    r.call("no token", "aria2.tellActive", [["gid"]])
    r.call("token not a string", "aria2.getVersion", [42])
    r.call("getVersion(no token)", "aria2.getVersion", [])

    # The JSON-RPC envelope.
    r.raw("request(parse error)", b'{"jsonrpc":"2.0","id":"x","method":')
    r.raw("request(not an object)", b"42")
    r.raw("request(no id)", {"jsonrpc": "2.0", "method": "aria2.getVersion", "params": [T]})
    r.raw("request(numeric id)", {"jsonrpc": "2.0", "id": 7, "method": "aria2.getSessionInfo", "params": [T]})
    r.raw("request(method not a string)", {"jsonrpc": "2.0", "id": "x", "method": 1, "params": [T]})
    r.raw("request(params not a list)", {"jsonrpc": "2.0", "id": "x", "method": "aria2.getVersion",
                                         "params": {"token": T}})
    r.raw("request(no params)", {"jsonrpc": "2.0", "id": "x", "method": "system.listNotifications"})
    r.raw("request(batch)", [{"jsonrpc": "2.0", "id": "1", "method": "aria2.getGlobalStat", "params": [T]},
                             {"jsonrpc": "2.0", "id": "2", "method": "aria2.tellActive", "params": [T, ["gid"]]},
                             7,
                             {"jsonrpc": "2.0", "id": "3", "method": "aria2.noSuchMethod", "params": [T]}])
    r.raw("request(empty batch)", [])

    # The end state.
    r.call("tellWaiting(final)", "aria2.tellWaiting", [T, 0, 10, ["gid", "status"]])
    r.call("getGlobalStat(final)", "aria2.getGlobalStat", [T])

    xmlrpc_pass(r)

    # Last, as one daemon may add a download where the other refuses: bad parameters of the add methods.
    r.call("addUri(uris not a list)", "aria2.addUri", [T, url])
    r.call("addUri(uris missing)", "aria2.addUri", [T])
    r.call("addUri(empty uris)", "aria2.addUri", [T, []])
    r.call("addUri(uri not a string)", "aria2.addUri", [T, [1]])
    r.call("addUri(options not a struct)", "aria2.addUri", [T, [url], "split=2"])
    r.call("addUri(position not a number)", "aria2.addUri", [T, [url], {"pause": "true"}, "0"])
    r.call("addUri(negative position)", "aria2.addUri", [T, [url], {"pause": "true"}, -1])
    r.call("addUri(bad option value)", "aria2.addUri", [T, [url], {"split": "many", "pause": "true"}])
    r.call("addUri(unsupported uri)", "aria2.addUri", [T, ["gopher://127.0.0.1/x"], {"pause": "true"}])
    r.call("addTorrent(not a torrent)", "aria2.addTorrent", [T, "bm90IGEgdG9ycmVudA=="])
    r.call("addMetalink(not a metalink)", "aria2.addMetalink", [T, "bm90IGEgbWV0YWxpbms="])
    r.call("changeGlobalOption(value not a string)", "aria2.changeGlobalOption", [T, {"max-download-result": 50}])


def xmlrpc_pass(r):
    """The same kind of calls as XML-RPC (`POST /rpc`), answers parsed with xmlrpc.client.loads; labels start with
    `xmlrpc `. The one download added here is removed at the end (through JSON-RPC, not compared), so that the
    queue is the same as before for what follows."""
    x = Gid("xml paused", fallback=UNKNOWN_GID)
    r.xml_call("getVersion", "aria2.getVersion", [T])
    r.xml_call("system.listMethods", "system.listMethods", [])
    r.xml_call("getGlobalOption", "aria2.getGlobalOption", [T])
    r.xml_add("addUri(paused, options, position)", "xml paused",
              [T, [r.url("small.bin")], {"pause": "true", "split": "2", "out": "xml-paused.bin",
                                         "header": ["X-Xml-One: 1", "X-Xml-Two: 2"]}, 0])
    r.xml_call("tellStatus(paused)", "aria2.tellStatus", [T, x])
    r.xml_call("tellStatus(paused, keys)", "aria2.tellStatus", [T, x, TELL_KEYS])
    r.xml_call("getOption(paused)", "aria2.getOption", [T, x])
    r.xml_call("tellWaiting(0,10, keys)", "aria2.tellWaiting", [T, 0, 10, ["gid", "status"]])
    r.xml_call("tellWaiting(0,10, i4)", "aria2.tellWaiting", [T, 0, 10, ["gid", "status"]], int_tag="i4")
    r.xml_call("changePosition(POS_END)", "aria2.changePosition", [T, x, 0, "POS_END"])
    r.xml_call("changePosition(POS_SET 0)", "aria2.changePosition", [T, x, 0, "POS_SET"])
    r.xml_call("system.multicall", "system.multicall", [[
        {"methodName": "aria2.getGlobalStat", "params": [T]},
        {"methodName": "aria2.tellStatus", "params": [T, x, ["gid", "status"]]},
        {"methodName": "aria2.tellStatus", "params": [T, UNKNOWN_GID]},
        {"methodName": "aria2.noSuchMethod", "params": [T]},
        {"methodName": "aria2.tellActive", "params": ["token:wrong"]},
    ]], indexed=True)
    r.xml_call("wrong token", "aria2.tellActive", ["token:wrong", ["gid"]])
    r.xml_call("unknown method", "aria2.noSuchMethod", [T])
    r.xml_exchange("request(malformed)", lambda d: b"<?xml version='1.0'?><methodCall><methodName>aria2.getVersion")
    for daemon in r.daemons:
        gid = daemon.gids.get("xml paused")
        if gid:
            daemon.request("aria2.remove", ["token:" + daemon.secret, gid])
    r.settle()


# ------------------------------------------------------------------------------------------ the differences file

class Allowed:
    def __init__(self, pattern, reason, line):
        self.pattern, self.reason, self.line = pattern, reason, line
        self.regex = re.compile("".join(".*" if c == "*" else re.escape(c) for c in pattern), re.DOTALL)
        self.matched = 0


def read_differences(path):
    entries = []
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as error:
        raise TestError(f"cannot read the differences file: {error}") from error
    seen = set()
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pattern, tab, reason = line.partition("\t")
        if not tab or not pattern.strip() or not reason.strip() or pattern != pattern.strip():
            raise TestError(f"{path}:{number}: want IDENTIFIER-OR-GLOB<TAB>REASON, got {line!r}")
        if pattern in seen:
            raise TestError(f"{path}:{number}: {pattern!r} is listed twice")
        seen.add(pattern)
        entries.append(Allowed(pattern, reason.strip(), number))
    return entries


def docs_section(entries, differences_path):
    rel = os.path.relpath(differences_path, REPO)
    rows = [
        BEGIN_MARKER,
        f"<!-- Generated from {rel} by `scripts/aria2/aria2_differential.py --write-docs docs/rpc.md`; do not edit. -->",
        "| What differs (`LABEL: KIND: PATH`; `*` matches anything) | Why |",
        "|---|---|",
    ]
    for entry in entries:
        pattern = entry.pattern.replace("|", "\\|")
        reason = entry.reason.replace("|", "\\|")
        rows.append(f"| `{pattern}` | {reason} |")
    rows.append(END_MARKER)
    return "\n".join(rows)


def split_doc(text):
    begin, end = text.find(BEGIN_MARKER), text.find(END_MARKER)
    if begin < 0 or end < begin:
        return None
    return text[:begin], text[begin:end + len(END_MARKER)], text[end + len(END_MARKER):]


def check_docs(doc_path, entries, differences_path):
    with open(doc_path, encoding="utf-8") as handle:
        parts = split_doc(handle.read())
    want = docs_section(entries, differences_path)
    fix = f"scripts/aria2/aria2_differential.py --write-docs {doc_path}"
    if os.path.abspath(differences_path) != DEFAULT_DIFFERENCES:
        fix += f" --differences {differences_path}"
    if parts is None:
        print(f"aria2-differential: {doc_path} has no section between {BEGIN_MARKER} and {END_MARKER}; "
              f"run {fix}")
        return 1
    if parts[1] != want:
        print(f"aria2-differential: the differences section of {doc_path} is not the one generated from "
              f"{differences_path}; run {fix}")
        return 1
    print(f"aria2-differential: {doc_path} lists the {len(entries)} allowed differences")
    return 0


def write_docs(doc_path, entries, differences_path):
    with open(doc_path, encoding="utf-8") as handle:
        text = handle.read()
    section = docs_section(entries, differences_path)
    parts = split_doc(text)
    if parts is None:
        heading = ("\n## Differences from aria2 (the differential test)\n"
                   "`scripts/aria2/aria2-differential.sh BINARY` runs `aria2c --enable-rpc` and `downpour daemon` side by\n"
                   "side, makes the same calls on both (`scripts/aria2/aria2_differential.py`) and fails on any difference\n"
                   "not listed in `docs/aria2-differences.tsv`, and on a line there that matches nothing. The allowed\n"
                   "ones:\n\n")
        text = text.rstrip("\n") + "\n" + heading + section + "\n"
    else:
        text = parts[0] + section + parts[2]
    with open(doc_path, "w", encoding="utf-8") as handle:
        handle.write(text)
    print(f"aria2-differential: wrote {len(entries)} differences into {doc_path}")
    return 0


# ------------------------------------------------------------------------------------------ main

def run(args, entries):
    work = tempfile.mkdtemp(prefix="aria2-differential.")
    daemons = []
    try:
        secret = "diff" + secrets.token_hex(12)
        aria2 = Aria2(work, secret, args.aria2c)
        downpour = Downpour(work, secret, args.downpour)
        daemons = [aria2, downpour]
        aria2.start()
        downpour.start()
        print(f"aria2-differential: aria2c on port {aria2.port}, downpour on port {downpour.port}")
        runner = Runner(aria2, downpour, args.base_url)
        if args.dump:
            runner.dump = open(args.dump, "w", encoding="utf-8")
        try:
            scenario(runner)
        finally:
            if runner.dump:
                runner.dump.close()
        found = runner.differences.found
        print(f"aria2-differential: {runner.calls} calls on each daemon, {len(found)} differences")
    finally:
        for daemon in daemons:
            try:
                daemon.stop()
            except Exception as error:  # keep cleaning up
                print(f"aria2-differential: stopping {daemon.name}: {error}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)

    new = []
    for identifier, detail in sorted(found.items()):
        # An XML-RPC row repeats a JSON-RPC call: the line that allows a difference over JSON-RPC allows it over
        # XML-RPC too; what only XML-RPC shows is listed with its `xmlrpc ` label.
        names = [identifier]
        if identifier.startswith(XML_LABEL_PREFIX):
            names.append(identifier[len(XML_LABEL_PREFIX):])
        matching = [e for e in entries if any(e.regex.fullmatch(name) for name in names)]
        allowed = matching[0] if matching else None
        for entry in matching:
            entry.matched += 1
        if args.report:
            print(f"{'allowed' if allowed else 'NEW    '} {identifier}\n            {detail}")
        elif allowed is None:
            new.append((identifier, detail))
    stale = [e for e in entries if e.matched == 0]
    if args.report:
        for entry in stale:
            print(f"STALE   line {entry.line}: {entry.pattern} (matched nothing)")
        return 0
    for identifier, detail in new:
        print(f"NOT ALLOWED: {identifier}\n    {detail}")
    for entry in stale:
        print(f"STALE: {args.differences}:{entry.line}: {entry.pattern} (matched no difference)")
    if new or stale:
        print(f"aria2-differential: FAILED: {len(new)} differences not allowed, {len(stale)} stale lines")
        return 1
    print(f"aria2-differential: ok, all {len(found)} differences are allowed")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--downpour", metavar="BINARY", help="the downpour binary")
    parser.add_argument("--aria2c", metavar="BINARY", default=shutil.which("aria2c") or "/usr/bin/aria2c",
                        help="the aria2c binary (default: aria2c on PATH)")
    parser.add_argument("--base-url", metavar="URL",
                        help="an HTTP server on 127.0.0.1 with small.bin, slow.bin and no missing.bin")
    parser.add_argument("--differences", metavar="FILE", default=DEFAULT_DIFFERENCES,
                        help="the allowed differences (default: docs/aria2-differences.tsv)")
    parser.add_argument("--report", action="store_true",
                        help="print every difference found, allowed or not, and exit 0")
    parser.add_argument("--deadline", metavar="SECONDS", type=int, default=600,
                        help="give up (exit 2, daemons stopped) after this long (default: 600)")
    parser.add_argument("--dump", metavar="FILE",
                        help="write every call's two answers (normalized) to FILE, one JSON line per call")
    parser.add_argument("--check-docs", metavar="DOC", help="check the generated section of DOC, then exit")
    parser.add_argument("--write-docs", metavar="DOC", help="rewrite the generated section of DOC, then exit")
    args = parser.parse_args()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def out_of_time(*_):
        raise TestError(f"the run took longer than {args.deadline} s")
    signal.signal(signal.SIGALRM, out_of_time)
    try:
        entries = read_differences(args.differences)
        if args.check_docs or args.write_docs:
            if args.write_docs:
                return write_docs(args.write_docs, entries, args.differences)
            return check_docs(args.check_docs, entries, args.differences)
        if not args.downpour or not args.base_url:
            parser.error("--downpour and --base-url are needed to run the test")
        for binary in (args.downpour, args.aria2c):
            if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
                raise TestError(f"not an executable: {binary}")
        signal.alarm(args.deadline)
        return run(args, entries)
    except TestError as error:
        print(f"aria2-differential: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
