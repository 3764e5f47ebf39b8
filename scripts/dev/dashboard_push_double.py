#!/usr/bin/env python3
"""Development only: a stand-in for the daemon's push, in front of a real aria2c.

A WebSocket server on /jsonrpc that passes every JSON-RPC request through to aria2c (HTTP POST) and
implements Downpour's extension: `downpour.subscribe` (token checked like any aria2 method), then a
`downpour.onProgress` notification every second with
    {"globalStat": {...}, "maxOverallDownloadLimit": "N", "queueVersion": "N",
     "active": [status + "ranges": [[start, end], ...] + "connectionRanges": [{"id", "start", "end",
                "downloadSpeed"}]]}
The ranges come from aria2's bitfield; aria2 does not say where its connections are, so each missing
stretch stands for one connection (enough to draw the page's segment map). It lets the page's push path be
exercised before the daemon exists:

    scripts/interop/dashboard-interop.sh --aria2c --push-double

Needs: pip install websockets (13 or newer).
"""

import argparse
import asyncio
import hashlib
import json
import urllib.request

from websockets.asyncio.server import serve

KEYS = ["gid", "status", "totalLength", "completedLength", "downloadSpeed", "connections", "dir", "files",
        "bitfield", "numPieces", "pieceLength"]


class Aria2:
    def __init__(self, url, secret):
        self.url = url
        self.secret = secret
        self.next_id = 0

    def post_raw(self, body: bytes) -> bytes:
        req = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                return r.read()
        except urllib.error.HTTPError as e:  # aria2 answers errors with 400 and a JSON body
            return e.read()

    def call(self, method, *params):
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                           "params": [f"token:{self.secret}", *params]}).encode()
        answer = json.loads(self.post_raw(body))
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer["result"]


def ranges_from_bitfield(s):
    total = int(s.get("totalLength") or 0)
    bits = s.get("bitfield") or ""
    piece = int(s.get("pieceLength") or 0)
    n = int(s.get("numPieces") or 0)
    done, start = [], None
    for i in range(n + 1):
        have = i < n and bits and (int(bits[i >> 2], 16) >> (3 - (i & 3))) & 1
        if have and start is None:
            start = i
        if not have and start is not None:
            done.append([start * piece, min(i * piece, total)])
            start = None
    return done


def gaps(done, total):
    out, pos = [], 0
    for a, b in done:
        if a > pos:
            out.append([pos, a])
        pos = max(pos, b)
    if pos < total:
        out.append([pos, total])
    return out


class Double:
    def __init__(self, aria2):
        self.aria2 = aria2
        self.subscribers = set()
        self.conn_ids = {}  # (gid, gap end) -> id
        self.next_conn = 0

    def progress(self):
        a = self.aria2
        stat = a.call("aria2.getGlobalStat")
        option = a.call("aria2.getGlobalOption")
        active = a.call("aria2.tellActive", KEYS)
        waiting = a.call("aria2.tellWaiting", 0, 1000, ["gid", "status"])
        stopped = a.call("aria2.tellStopped", 0, 1000, ["gid", "status"])
        version = hashlib.sha1(json.dumps([waiting, stopped, [s["gid"] for s in active]]).encode()).hexdigest()
        for s in active:
            total = int(s.get("totalLength") or 0)
            done = ranges_from_bitfield(s)
            holes = gaps(done, total) if total else []
            holes = holes[: max(1, int(s.get("connections") or 0))] if int(s.get("connections") or 0) else []
            speed = int(s.get("downloadSpeed") or 0)
            conns = []
            for start, end in holes:
                key = (s["gid"], end)
                if key not in self.conn_ids:
                    self.next_conn += 1
                    self.conn_ids[key] = self.next_conn
                conns.append({"id": self.conn_ids[key], "start": start, "end": end,
                              "downloadSpeed": str(speed // max(1, len(holes)))})
            s["ranges"] = done
            s["connectionRanges"] = conns
            s.pop("bitfield", None)
        return {
            "globalStat": stat,
            "maxOverallDownloadLimit": option.get("max-overall-download-limit", "0"),
            "queueVersion": str(int(version[:8], 16)),
            "active": active,
        }

    async def pusher(self):
        while True:
            await asyncio.sleep(1)
            if not self.subscribers:
                continue
            try:
                p = await asyncio.to_thread(self.progress)
            except Exception as e:  # noqa: BLE001 - a dev tool: say it and go on
                print("push double: progress failed:", e, flush=True)
                continue
            frame = json.dumps({"jsonrpc": "2.0", "method": "downpour.onProgress", "params": [p]})
            for ws in list(self.subscribers):
                try:
                    await ws.send(frame)
                except Exception:  # noqa: BLE001
                    self.subscribers.discard(ws)

    async def handler(self, ws):
        try:
            async for text in ws:
                try:
                    msg = json.loads(text)
                except ValueError:
                    msg = None
                if isinstance(msg, dict) and msg.get("method") == "downpour.subscribe":
                    params = msg.get("params") or []
                    if params[:1] != [f"token:{self.aria2.secret}"]:
                        await asyncio.sleep(1)
                        answer = {"id": msg.get("id"), "jsonrpc": "2.0",
                                  "error": {"code": 1, "message": "Unauthorized"}}
                    else:
                        self.subscribers.add(ws)
                        answer = {"id": msg.get("id"), "jsonrpc": "2.0", "result": "OK"}
                    await ws.send(json.dumps(answer))
                    continue
                body = text.encode() if isinstance(text, str) else text
                answer = await asyncio.to_thread(self.aria2.post_raw, body)
                await ws.send(answer.decode())
        finally:
            self.subscribers.discard(ws)


async def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", type=int, required=True)
    p.add_argument("--aria2", required=True, help="aria2c's http://127.0.0.1:PORT/jsonrpc")
    p.add_argument("--secret", required=True)
    args = p.parse_args()
    double = Double(Aria2(args.aria2, args.secret))
    async with serve(double.handler, "127.0.0.1", args.listen):
        print(f"push double on ws://127.0.0.1:{args.listen}/jsonrpc -> {args.aria2}", flush=True)
        await double.pusher()


if __name__ == "__main__":
    asyncio.run(main())
