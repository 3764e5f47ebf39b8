#!/usr/bin/env python3
"""A web page of another origin attacks a local RPC daemon in headless Chromium; the daemon must not budge.

The page (scripts/browser/hostile.html, served by nginx on another port) tries what any page can send without a
preflight: a no-cors fetch POST, a text/plain form POST, a <script> JSONP GET and a WebSocket, each asking
aria2.addUri to download a file into a directory of the page's choosing. Afterwards the daemon's queue must be
empty and the directory must not exist.

    python3 scripts/hostile_page_test.py --page-base http://127.0.0.1:NGINX --file URL --rpc-port PORT \
        --dir DIR [--expect-attack-works]

--expect-attack-works turns it into the control run (against aria2c without a secret): there the attack must
add at least one download, which shows the page's attacks are real. Prints `ok`/`FAIL` lines and
`N passed, N failed`.
"""
import argparse
import json
import os
import sys
import tempfile
import shutil
import time
import urllib.parse
import urllib.request

from dashboard_test import make_driver


def rpc(port, method, params=None):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/jsonrpc", data=body)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)["result"]


def queue_size(port):
    return (len(rpc(port, "aria2.tellActive")) + len(rpc(port, "aria2.tellWaiting", [0, 1000]))
            + len(rpc(port, "aria2.tellStopped", [0, 1000])))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--page-base", required=True, help="where hostile.html is served (another origin)")
    p.add_argument("--file", required=True, help="the URL the page asks the daemon to download")
    p.add_argument("--rpc-port", type=int, required=True)
    p.add_argument("--dir", required=True, help="the directory the page asks for (must not appear)")
    p.add_argument("--name", default="downpour")
    p.add_argument("--expect-attack-works", action="store_true")
    args = p.parse_args()

    passed = failed = 0
    before = queue_size(args.rpc_port)
    profile = tempfile.mkdtemp(prefix="downpour-hostile-chrome.")
    driver = make_driver(profile)
    try:
        query = urllib.parse.urlencode({"port": args.rpc_port, "dir": args.dir, "file": args.file})
        driver.get(f"{args.page_base}/hostile.html?{query}")
        deadline = time.monotonic() + 60
        while not driver.title.startswith("done") and time.monotonic() < deadline:
            time.sleep(0.1)
        title = driver.title
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    if not title.startswith("done"):
        print(f"FAIL {args.name}: the page did not finish its attempts ({title!r})")
        print("0 passed, 1 failed")
        return 1
    results = json.loads(title[len("done "):])
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
