#!/usr/bin/env python3
"""Checks that aria2tui (a PyPI aria2 client: `python3 -m pip install aria2tui==0.1.13.4`) shows a download's
`dir` and `split`, read through its own aria2.getOption code paths, from an aria2-compatible RPC endpoint.

Usage: client_getoption_check.py --rpc-url http://127.0.0.1:PORT/jsonrpc --secret S [--expect-dir DIR] [--timeout SECONDS]

Steps, all through aria2tui's own functions (aria2tui.utils.aria2c):
  1. addDownload(uri, download_options_dict={pause, split, out}): a paused download, no per-download dir, so
     its dir is the daemon's (-d); the expected dir is --expect-dir, else the client's getGlobalOption()["dir"].
  2. getQueue(): aria2tui's "Queue"/"All" list. It calls tellWaiting, then getOptionAndFileInfo (a JSON-RPC
     batch of aria2.getOption + aria2.getFiles per gid), then format.dataToPickerRows, which reads
     options["result"]["dir"] for the DIR column and silently drops the row when that key is missing.
  3. getAllInfo(gid): the per-download info view; its "getOption" entry must hold dir and split.
Every wait has a deadline; the download is removed at the end. Prints one line per check; exits 1 if any fails.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from urllib.parse import urlsplit

SPLIT = "3"
OUT = "getoption-check.bin"
failures = []


def ok(message):
    print(f"ok   {message}")


def fail(message):
    print(f"FAIL {message}")
    failures.append(message)


def configure_client(rpc_url, secret, config_dir):
    """aria2tui reads url/port/token from a TOML file named by ARIA2TUI_CONFIG_PATH, at import time."""
    parts = urlsplit(rpc_url)
    if parts.scheme not in ("http", "https") or parts.port is None or parts.path != "/jsonrpc":
        sys.exit(f"--rpc-url must look like http://127.0.0.1:PORT/jsonrpc (aria2tui appends :PORT/jsonrpc), got {rpc_url}")
    path = os.path.join(config_dir, "config.toml")
    with open(path, "w") as handle:
        handle.write("[general]\n")
        handle.write(f"url = {json.dumps(f'{parts.scheme}://{parts.hostname}')}\n")
        handle.write(f"port = {json.dumps(str(parts.port))}\n")
        handle.write(f"token = {json.dumps(secret)}\n")
    os.environ["ARIA2TUI_CONFIG_PATH"] = path


def until(deadline_at, attempt, what):
    """Calls attempt() until it returns a value other than None (exceptions count as not yet), or the deadline."""
    last = None
    while time.monotonic() < deadline_at:
        try:
            value = attempt()
            if value is not None:
                return value
        except Exception as error:  # aria2tui's sendReq has a 0.5 s timeout of its own
            last = error
        time.sleep(0.1)
    raise TimeoutError(f"timed out waiting for {what}" + (f" (last error: {last!r})" if last else ""))


def gone_or_purged(client, gid):
    """True once the removed download is unknown (aria2 forgets a removed never-started one at once) or its
    result is purged; None while it is still being stopped."""
    from urllib.error import HTTPError
    try:
        answer = client.sendReq(client.tellStatus(gid))
    except HTTPError:  # aria2 answers an unknown GID with HTTP 400 and error code 1
        return True
    if "error" in answer:
        return True
    status = answer["result"]["status"]
    if status in ("removed", "complete", "error"):
        client.sendReq(client.removeDownloadResult(gid))
        return True
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpc-url", required=True)
    parser.add_argument("--secret", default="")
    parser.add_argument("--expect-dir", help="the dir the download must show (default: the daemon's global dir)")
    parser.add_argument("--timeout", type=float, default=30.0, help="deadline for the whole check, seconds")
    args = parser.parse_args()
    deadline_at = time.monotonic() + args.timeout

    with tempfile.TemporaryDirectory(prefix="aria2tui-check-") as config_dir:
        configure_client(args.rpc_url, args.secret, config_dir)
        from aria2tui.utils.logging_utils import configure_logging
        configure_logging(debug=False)  # aria2tui logs nowhere unless asked
        import aria2tui
        from aria2tui.utils import aria2c as client

        version = getattr(aria2tui, "__version__", None)
        if version is None:
            from importlib.metadata import version as dist_version
            version = dist_version("aria2tui")
        print(f"aria2tui {version} → {args.rpc_url}")

        until(deadline_at, lambda: True if client.testAriaConnection() else None, "the daemon to answer getVersion")

        if args.expect_dir:
            expected_dir = args.expect_dir
        else:
            expected_dir = until(deadline_at, lambda: client.sendReq(client.getGlobalOption())["result"]["dir"],
                                 "getGlobalOption")
        expected_dir = os.path.normpath(expected_dir)
        ok(f"expected dir: {expected_dir}")

        added, gid = client.addDownload(
            f"http://127.0.0.1:9/{OUT}",
            download_options_dict={"pause": "true", "split": SPLIT, "out": OUT},
        )
        if not added:
            fail(f"addDownload refused: {gid}")
            return 1
        ok(f"addDownload (paused, split={SPLIT}, out={OUT}): gid {gid}")
        try:
            until(deadline_at,
                  lambda: client.sendReq(client.tellStatus(gid))["result"]["status"] == "paused" or None,
                  "the download to be paused")
            ok("tellStatus: paused")

            # 2. The queue list, as aria2tui's main screen builds it.
            items, header = until(deadline_at, lambda: client.getQueue(show_pc_bar=False), "getQueue")
            rows = [dict(zip(header, row)) for row in items]
            row = next((r for r in rows if r.get("GID") == gid), None)
            if row is None:
                raw = client.sendReq(client.getOption(gid)).get("result", {})
                fail(f"getQueue (tellWaiting + getOption/getFiles batch + dataToPickerRows) does not list {gid}: "
                     f"{len(rows)} row(s); aria2.getOption({gid}) answered keys {sorted(raw)} "
                     f"({'no' if 'dir' not in raw else 'with'} 'dir'), and dataToPickerRows drops a row without it")
            else:
                shown = os.path.normpath(row["DIR"]) if row["DIR"] else ""
                if row["Status"] != "paused" or row["Name"] != OUT or shown != expected_dir:
                    fail(f"getQueue row for {gid}: Status={row['Status']!r} Name={row['Name']!r} DIR={row['DIR']!r}; "
                         f"expected paused, {OUT!r}, {expected_dir!r}")
                else:
                    ok(f"getQueue lists {gid}: Status=paused Name={OUT} DIR={row['DIR']}")

            # 3. The per-download info view.
            infos = until(deadline_at, lambda: client.getAllInfo(gid), "getAllInfo")
            entry = next((i for i in infos if i.get("function") == "getOption"), {})
            options = entry.get("result")
            if not isinstance(options, dict):
                fail(f"getAllInfo({gid}) has no getOption result: {entry}")
            else:
                shown_dir = options.get("dir")
                shown_split = options.get("split")
                if shown_dir is None or os.path.normpath(shown_dir) != expected_dir or shown_split != SPLIT:
                    fail(f"getAllInfo({gid}) getOption shows dir={shown_dir!r} split={shown_split!r}; "
                         f"expected {expected_dir!r}, {SPLIT!r} (keys: {sorted(options)})")
                else:
                    ok(f"getAllInfo getOption: dir={shown_dir} split={shown_split} ({len(options)} options)")
        except TimeoutError as error:
            fail(str(error))
        finally:
            try:
                client.sendReq(client.remove(gid))
                until(deadline_at + 5, lambda: gone_or_purged(client, gid), "the removed download to be gone")
            except Exception as error:
                print(f"note: clean-up of {gid} failed: {error!r}")

    if failures:
        print(f"0 passed, {len(failures)} failed")
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
