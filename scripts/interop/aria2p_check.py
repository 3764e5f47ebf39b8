#!/usr/bin/env python3
"""Drives a running `downpour daemon` with aria2p's library, as an aria2 user's script would.

Usage: aria2p_check.py PORT SECRET BASE_URL DOWNLOAD_DIR

BASE_URL serves `small.bin` (fast) and `slow.bin` (rate-limited, long enough to pause mid-flight); their
SHA-256 come in the environment (SMALL_SHA256, SLOW_SHA256). Prints one line per check; exits 1 on the first failure.
"""

import hashlib
import os
import sys
import threading
import time

import aria2p


def fail(message):
    print(f"FAIL {message}")
    sys.exit(1)


def ok(message):
    print(f"ok   {message}")


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wait_for(predicate, what, limit=60.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    fail(f"timed out waiting for {what}")


def main():
    port, secret, base, directory = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    api = aria2p.API(aria2p.Client(host="http://127.0.0.1", port=int(port), secret=secret))

    # Notifications over the WebSocket, as `aria2p listen` receives them.
    seen = {"start": set(), "pause": set(), "complete": set(), "stop": set(), "error": set()}
    lock = threading.Lock()

    def recorder(kind):
        def record(_api, gid):
            with lock:
                seen[kind].add(gid)
        return record

    api.listen_to_notifications(
        threaded=True,
        on_download_start=recorder("start"),
        on_download_pause=recorder("pause"),
        on_download_complete=recorder("complete"),
        on_download_stop=recorder("stop"),
        on_download_error=recorder("error"),
        timeout=1,
        handle_signals=False,
    )
    time.sleep(0.5)  # let the listener connect before the first event

    def saw(kind, gid):
        with lock:
            return gid in seen[kind]

    # 1. Add and finish a file.
    small = api.add_uris([f"{base}/small.bin"], options={"out": "small-1.bin"})
    wait_for(lambda: api.get_download(small.gid).is_complete, "small.bin to complete")
    if sha256_of(os.path.join(directory, "small-1.bin")) != os.environ["SMALL_SHA256"]:
        fail("small-1.bin differs from the served file")
    ok(f"add_uris: {small.gid} complete, SHA-256 identical")
    wait_for(lambda: saw("start", small.gid) and saw("complete", small.gid), "start+complete notifications")
    ok("notifications: onDownloadStart and onDownloadComplete received")

    # 2. Pause a download in flight, then resume it: it continues and ends identical.
    slow = api.add_uris([f"{base}/slow.bin"], options={"out": "slow-1.bin", "split": "2"})
    wait_for(lambda: api.get_download(slow.gid).completed_length > 0, "slow.bin to start")
    result = api.pause([api.get_download(slow.gid)])
    if result != [True]:
        fail(f"pause returned {result}")
    wait_for(lambda: api.get_download(slow.gid).status == "paused", "slow.bin to be paused")
    paused_at = api.get_download(slow.gid).completed_length
    ok(f"pause: {slow.gid} paused at {paused_at} bytes")
    wait_for(lambda: saw("pause", slow.gid), "onDownloadPause")
    ok("notifications: onDownloadPause received")
    result = api.resume([api.get_download(slow.gid)])
    if result != [True]:
        fail(f"resume returned {result}")
    wait_for(lambda: api.get_download(slow.gid).is_complete, "slow.bin to complete", limit=120)
    if sha256_of(os.path.join(directory, "slow-1.bin")) != os.environ["SLOW_SHA256"]:
        fail("slow-1.bin differs from the served file after pause and resume")
    ok("resume: completed, SHA-256 identical")

    # 3. A failing download is reported as an error with aria2's code.
    missing = api.add_uris([f"{base}/missing.bin"])
    wait_for(lambda: api.get_download(missing.gid).status == "error", "the 404 to fail")
    download = api.get_download(missing.gid)
    if download.error_code != "3":
        fail(f"404 gave errorCode {download.error_code!r} ({download.error_message!r}), expected '3'")
    ok(f"error: 404 → errorCode 3 ({download.error_message})")
    wait_for(lambda: saw("error", missing.gid), "onDownloadError")
    ok("notifications: onDownloadError received")

    # 4. Remove an active download: it stops, and aria2p removes its result.
    another = api.add_uris([f"{base}/slow.bin"], options={"out": "slow-2.bin"})
    wait_for(lambda: api.get_download(another.gid).completed_length > 0, "slow-2.bin to start")
    results = api.remove([api.get_download(another.gid)], force=True)
    if results != [True]:
        fail(f"remove returned {results}")
    wait_for(lambda: saw("stop", another.gid), "onDownloadStop")
    gids = {d.gid for d in api.get_downloads()}
    if another.gid in gids:
        fail("the removed download is still listed")
    # The run lets go of its file as it ends, a moment after the queue has stopped it (and sent onDownloadStop):
    # the .part must be gone soon after, as the command line's remove is checked above.
    part = os.path.join(directory, "slow-2.bin.part")
    wait_for(lambda: not os.path.exists(part), "the removed download's .part file to be deleted", limit=30)
    ok("remove: stopped, listed no more, no .part left")

    # 5. A paused-on-add download, then purge of the results.
    queued = api.add_uris([f"{base}/small.bin"], options={"out": "small-2.bin", "pause": "true"})
    if api.get_download(queued.gid).status != "paused":
        fail("pause=true did not add it paused")
    ok("add with pause=true: paused")
    if not api.purge():
        fail("purge did not answer OK")
    statuses = {d.gid: d.status for d in api.get_downloads()}
    if statuses != {queued.gid: "paused"}:
        fail(f"after purge the daemon lists {statuses}")
    ok("purge: the results are gone, the paused download stays")

    stats = api.get_stats()
    ok(f"get_stats: {stats.num_active} active, {stats.num_waiting} waiting, {stats.num_stopped_total} stopped in all")
    api.stop_listening()


if __name__ == "__main__":
    main()
