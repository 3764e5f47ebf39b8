#!/usr/bin/env python3
"""A web page of another origin attacks a local RPC daemon in headless Chromium; the daemon must not budge.
With --secret, the other way round: a page of another origin that holds the secret adds downloads, and one
with a wrong secret cannot.

The page (scripts/interop/browser/hostile.html, served by nginx on another port) tries what any page can send without a
preflight: a no-cors fetch POST, a text/plain form POST, a <script> JSONP GET and a WebSocket, each asking
aria2.addUri to download a file into a directory of the page's choosing. Afterwards the daemon's queue must be
empty and the directory must not exist.

    python3 scripts/interop/hostile_page_test.py --page-base http://127.0.0.1:NGINX --file URL --rpc-port PORT \
        --dir DIR [--expect-attack-works]

--expect-attack-works turns it into the control run (against aria2c without a secret): there the attack must
add at least one download, which shows the page's attacks are real.

    python3 scripts/interop/hostile_page_test.py --secret S --file URL --rpc-port PORT --dir DIR \
        [--page-base URL] [--right-adds cors,no-cors] [--cors-readable yes|no]

The secret mode: scripts/interop/browser/secret-page.html, served from another origin (by this script on a free port
of 127.0.0.1, unless --page-base says where it is served), sends aria2.addUri with "token:S" first as a
preflighted JSON fetch (cors) and as a no-cors text/plain fetch, and the same two with a wrong token, each
with its own out name. Then, through the RPC with the token, the new downloads (tellActive, tellWaiting,
tellStopped) must be exactly the right-token adds named in --right-adds (default both), and no wrong-token
add may appear (nor its file in DIR). --cors-readable checks whether the page could read the answer to the
right-token cors fetch (yes: the origin is allowed CORS headers; no: the fetch threw).

Prints `ok`/`FAIL` lines and `N passed, N failed`; exits 1 on any failure. Every wait has a deadline.
"""
import argparse
import functools
import http.server
import json
import os
import sys
import tempfile
import threading
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

from dashboard_test import make_driver


BROWSER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser")
KINDS = ("cors", "no-cors")


def rpc(port, method, params=None, token=None):
    params = list(params or [])
    if token is not None:
        params.insert(0, f"token:{token}")
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/jsonrpc", data=body)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as e:  # aria2 answers an error with HTTP 400 and a JSON-RPC error
        answer = json.load(e)
    if "error" in answer:
        raise RuntimeError(f"{method}: {answer['error']}")
    return answer["result"]


def all_downloads(port, token=None):
    return (rpc(port, "aria2.tellActive", [], token) + rpc(port, "aria2.tellWaiting", [0, 1000], token)
            + rpc(port, "aria2.tellStopped", [0, 1000], token))


def queue_size(port, token=None):
    return len(all_downloads(port, token))


def load_page(url, name):
    """Loads url in headless Chromium and waits (60 s at most) for a title `done {JSON}`; returns the JSON,
    or None after a FAIL line."""
    profile = tempfile.mkdtemp(prefix="downpour-hostile-chrome.")
    driver = make_driver(profile)
    try:
        driver.set_page_load_timeout(30)
        driver.get(url)
        deadline = time.monotonic() + 60
        while not driver.title.startswith("done") and time.monotonic() < deadline:
            time.sleep(0.1)
        title = driver.title
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    if not title.startswith("done"):
        print(f"FAIL {name}: the page did not finish its attempts ({title!r})")
        return None
    return json.loads(title[len("done "):])


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve_browser_dir():
    """Serves scripts/interop/browser on a free port of 127.0.0.1 (another origin than the daemon's) from a thread;
    returns the server (its base URL: http://127.0.0.1:server.server_port)."""
    handler = functools.partial(QuietHandler, directory=BROWSER_DIR)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def names_of(port, token, download):
    """The file names of a download: the base names of its files' paths, and its out option."""
    names = {os.path.basename(f.get("path", "")) for f in download.get("files", [])} - {""}
    try:
        out = rpc(port, "aria2.getOption", [download["gid"]], token).get("out")
        if out:
            names.add(out)
    except (RuntimeError, OSError, ValueError):
        pass  # aria2 before 1.35 knows no options of a stopped download; the path is enough then
    return names


def secret_main(args):
    passed = failed = 0

    def check(ok, text):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok   {args.name}: {text}")
        else:
            failed += 1
            print(f"FAIL {args.name}: not so: {text}")

    right_adds = {k for k in args.right_adds.split(",") if k}
    unknown = right_adds - set(KINDS)
    if unknown:
        raise SystemExit(f"--right-adds: unknown kind(s) {sorted(unknown)}; the kinds are {', '.join(KINDS)}")
    nonce = uuid.uuid4().hex[:10]
    outs = {(which, kind): f"{which}-{kind}-{nonce}.bin" for which in ("right", "wrong") for kind in KINDS}
    before = {d["gid"] for d in all_downloads(args.rpc_port, args.secret)}

    server = None
    page_base = args.page_base
    if not page_base:
        server = serve_browser_dir()
        page_base = f"http://127.0.0.1:{server.server_port}"
    try:
        query = urllib.parse.urlencode({"port": args.rpc_port, "token": args.secret, "file": args.file,
                                        "dir": args.dir, "nonce": nonce})
        results = load_page(f"{page_base}/secret-page.html?{query}", args.name)
    finally:
        if server:
            server.shutdown()
            server.server_close()
    if results is None:
        print(f"{passed} passed, {failed + 1} failed")
        return 1
    print(f"page of another origin ({page_base}) with the secret against {args.name}: {results}")

    # The adds the page saw answered are stored; wait (10 s at most) for the expected ones all the same, then
    # half a second more for any that should not be there.
    expected = {outs[("right", kind)] for kind in right_adds}
    deadline = time.monotonic() + 10
    while True:
        new = [d for d in all_downloads(args.rpc_port, args.secret) if d["gid"] not in before]
        seen = set().union(*(names_of(args.rpc_port, args.secret, d) for d in new)) if new else set()
        if expected <= seen or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    time.sleep(0.5)
    new = [d for d in all_downloads(args.rpc_port, args.secret) if d["gid"] not in before]
    seen = set().union(*(names_of(args.rpc_port, args.secret, d) for d in new)) if new else set()

    for kind in KINDS:
        out = outs[("right", kind)]
        how = "preflighted JSON fetch" if kind == "cors" else "no-cors text/plain fetch"
        if kind in right_adds:
            check(out in seen, f"the {how} with the right token added {out} (page: {results.get('right-' + kind)})")
        else:
            check(out not in seen, f"the {how} with the right token added nothing "
                                   f"(page: {results.get('right-' + kind)})")
    for kind in KINDS:
        out = outs[("wrong", kind)]
        check(out not in seen and not os.path.exists(os.path.join(args.dir, out)),
              f"the {'preflighted JSON' if kind == 'cors' else 'no-cors'} fetch with a wrong token added nothing "
              f"({out}; page: {results.get('wrong-' + kind)})")
    check(len(new) == len(expected), f"exactly {len(expected)} download(s) added ({len(new)}: {sorted(seen)})")
    if args.cors_readable:
        observed = results.get("right-cors", "")
        if args.cors_readable == "yes":
            check(observed.startswith("resolved"), f"the page could read the answer to its JSON fetch ({observed})")
        else:
            check(not observed.startswith("resolved"),
                  f"the page could not read the answer to its JSON fetch ({observed})")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--page-base", help="where hostile.html (secret-page.html) is served (another origin); "
                                       "required without --secret")
    p.add_argument("--file", required=True, help="the URL the page asks the daemon to download")
    p.add_argument("--rpc-port", type=int, required=True)
    p.add_argument("--dir", required=True, help="the directory the page asks for (must not appear)")
    p.add_argument("--name", default="downpour")
    p.add_argument("--expect-attack-works", action="store_true")
    p.add_argument("--secret", help="the secret mode: the daemon's RPC secret, which the page holds")
    p.add_argument("--right-adds", default="cors,no-cors",
                   help="with --secret: the right-token adds that must appear (the others must not)")
    p.add_argument("--cors-readable", choices=("yes", "no"),
                   help="with --secret: whether the page may read the answer to its JSON fetch")
    args = p.parse_args()
    if args.secret is not None:
        return secret_main(args)
    if not args.page_base:
        p.error("--page-base is required without --secret")

    passed = failed = 0
    before = queue_size(args.rpc_port)
    query = urllib.parse.urlencode({"port": args.rpc_port, "dir": args.dir, "file": args.file})
    results = load_page(f"{args.page_base}/hostile.html?{query}", args.name)
    if results is None:
        print("0 passed, 1 failed")
        return 1
    print(f"hostile page against {args.name}: {results}")
    # Give a download the page did start time to appear (an add is stored before it is answered).
    time.sleep(0.5)
    after = queue_size(args.rpc_port)
    added = after - before
    exists = os.path.exists(args.dir)
    if args.expect_attack_works:
        if added > 0:
            passed += 1
            print(f"ok   {args.name} (control): the page added {added} download(s) into {args.dir}")
        else:
            failed += 1
            print(f"FAIL {args.name} (control): the page added nothing; the attacks would prove nothing")
    else:
        for ok, text in (
            (added == 0, f"the queue is unchanged ({added} added)"),
            (not exists, f"{args.dir} was not created"),
            (not results["script"].startswith("answered"), f"the script tag got no answer ({results['script']})"),
            (not results["websocket"].startswith("answered"), f"the WebSocket was not served ({results['websocket']})"),
        ):
            if ok:
                passed += 1
                print(f"ok   {args.name}: {text}")
            else:
                failed += 1
                print(f"FAIL {args.name}: not so: {text}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
