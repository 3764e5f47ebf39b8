#!/usr/bin/env python3
"""HLS: one video of N segments, fetched by `downpour get` beside yt-dlp (its own HLS downloader, one fragment at a
time as it does by default, and 8 at a time with -N 8) and ffmpeg (-c copy), each timed to a durable file: the run,
then `sync`. The stream is made here by ffmpeg from a test pattern (x264 at a constant 16 Mbit/s, 2-s segments, MPEG-TS)
and served by nginx on loopback: without limits, and at 4 MiB/s a connection (nginx limit_rate), as a CDN that holds
each connection to a rate. Runs are interleaved, --reps of each; the medians are printed with downpour / best peer.

Each output is checked: downpour's is byte for byte the segments in order; yt-dlp's and ffmpeg's must be at least the
segments' length less 2 % (ffmpeg rewrites the TS packets as it copies them).

usage: hls_bench.py --downpour BIN --work DIR [--seconds 60] [--reps 3] [--modes unlimited,limited] [--json FILE]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from fleet import Nginx  # noqa: E402

MODES = {"unlimited": None, "limited": "4m"}


def make_stream(www, seconds):
    os.makedirs(f"{www}/v")
    subprocess.run(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=1280x720:rate=25",
         "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", str(seconds), "-c:v", "libx264",
         "-preset", "ultrafast", "-g", "50", "-b:v", "16M", "-minrate", "16M", "-maxrate", "16M", "-bufsize", "4M",
         "-x264-params", "nal-hrd=cbr", "-c:a", "aac", "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod",
         "-hls_segment_filename", f"{www}/v/seg%03d.ts", f"{www}/v/video.m3u8"],
        check=True, stdin=subprocess.DEVNULL)
    with open(f"{www}/v/video.m3u8") as file:
        names = [line.strip() for line in file if line.strip() and not line.startswith("#")]
    expected = b"".join(open(f"{www}/v/{name}", "rb").read() for name in names)
    return len(names), expected


def commands(downpour, url, out):
    yt = ["yt-dlp", "--no-config", "-q", "--no-progress", "--no-part", "--fixup", "never", "--hls-prefer-native",
          "-o", f"{out}/video.%(ext)s"]
    return {
        "downpour": [downpour, "get", "--no-conf", "-q", "-x", "8", "-d", out, url],
        "yt-dlp": yt + [url],
        "yt-dlp -N 8": yt + ["-N", "8", url],
        "ffmpeg -c copy": ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-i", url, "-c", "copy",
                           f"{out}/video.ts"],
    }


def output_of(out):
    files = [f for f in os.listdir(out) if not f.startswith(".")]
    return os.path.join(out, files[0]) if len(files) == 1 else None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--downpour", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--modes", default="unlimited,limited")
    parser.add_argument("--json")
    args = parser.parse_args()
    for tool in ("ffmpeg", "yt-dlp", "nginx"):
        if not shutil.which(tool):
            sys.exit(f"hls_bench: {tool} not found (apt-get install ffmpeg nginx; pip install yt-dlp)")
    os.makedirs(args.work, exist_ok=True)
    work = tempfile.mkdtemp(dir=args.work, prefix="hls-")
    os.chmod(work, 0o755)
    rows = []
    try:
        count, expected = make_stream(f"{work}/www", args.seconds)
        print(f"hls_bench: {count} segments, {len(expected) / 1e6:.1f} MB", file=sys.stderr)
        for mode in args.modes.split(","):
            nginx = Nginx(f"{work}/nginx-{mode}", f"{work}/www", MODES[mode])
            try:
                url = f"http://127.0.0.1:{nginx.port}/v/video.m3u8"
                for rep in range(args.reps):
                    for client, argv in commands(os.path.abspath(args.downpour), url, "OUT").items():
                        out = tempfile.mkdtemp(dir=work)
                        argv = [out if word == "OUT" else word.replace("OUT/", out + "/") for word in argv]
                        start = time.monotonic()
                        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, timeout=900)
                        subprocess.run(["sync"], check=True)
                        elapsed = time.monotonic() - start
                        path = output_of(out)
                        assert path, f"{client}: no single output in {out}: {os.listdir(out)}"
                        size = os.path.getsize(path)
                        if client == "downpour":
                            assert open(path, "rb").read() == expected, "downpour: not the segments in order"
                        else:
                            assert size >= 0.98 * len(expected), f"{client}: {size} bytes of {len(expected)}"
                        shutil.rmtree(out, ignore_errors=True)
                        rows.append({"mode": mode, "client": client, "rep": rep, "seconds": elapsed, "bytes": size})
                        print(f"hls_bench: {mode} {client} run {rep + 1}: {elapsed:.3f} s", file=sys.stderr)
            finally:
                nginx.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nHLS, {count} segments, {len(expected) / 1e6:.1f} MB, to a durable file (run + sync); median of "
          f"{args.reps}, seconds")
    clients = list(dict.fromkeys(r["client"] for r in rows))
    print(f"{'':12}" + "".join(f"{c:>18}" for c in clients) + f"{'downpour/best peer':>22}")
    for mode in args.modes.split(","):
        medians = {c: statistics.median(r["seconds"] for r in rows if r["mode"] == mode and r["client"] == c)
                   for c in clients}
        best_peer = min(v for c, v in medians.items() if c != "downpour")
        print(f"{mode:12}" + "".join(f"{medians[c]:>18.3f}" for c in clients)
              + f"{medians['downpour'] / best_peer:>22.2f}")
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=1)


if __name__ == "__main__":
    main()
