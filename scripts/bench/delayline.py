#!/usr/bin/env python3
"""A userspace delay line between two TAP devices (stdlib only).

Used by the benchmark (scripts/bench/lossy.py) for the `lossy` case on kernels without the `netem`
qdisc. It creates two TAP devices (IFF_TAP | IFF_NO_PI) in the network
namespace it is started in, then copies every Ethernet frame that the kernel
sends out of one device into the other, after holding it for --delay-ms and
dropping a --loss fraction of frames at random (each direction on its own, so
the round trip is twice the delay, as with `netem delay` on both ends of a
veth pair). --loss-from-a / --loss-from-b give each direction its own loss.

lossy.py moves one of the devices into a second namespace and gives both
addresses on a private /30; the frames never leave those namespaces.

It prints "ready" on standard output once both devices exist, and stops on
SIGTERM / SIGINT, printing what it did on standard error. It also stops by
itself after --max-seconds.
"""

import argparse
import collections
import fcntl
import math
import os
import random
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
READ_BURST = 256  # frames read from one device per wake-up, at most


def open_tap(name):
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    ifr = struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI)
    fcntl.ioctl(fd, TUNSETIFF, ifr)
    return fd


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="first TAP device name")
    ap.add_argument("--b", required=True, help="second TAP device name")
    ap.add_argument("--delay-ms", type=float, default=50.0)
    ap.add_argument("--loss", type=float, default=0.005, help="fraction, 0..1, each way")
    ap.add_argument("--loss-from-a", type=float, default=None,
                    help="fraction of the frames sent out of --a that are lost (default: --loss)")
    ap.add_argument("--loss-from-b", type=float, default=None,
                    help="fraction of the frames sent out of --b that are lost (default: --loss)")
    ap.add_argument("--queue-limit", type=int, default=200000,
                    help="frames held per direction before tail drop")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--max-seconds", type=float, default=6 * 3600.0)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    delay = args.delay_ms / 1000.0
    loss_from_a = args.loss if args.loss_from_a is None else args.loss_from_a
    loss_from_b = args.loss if args.loss_from_b is None else args.loss_from_b

    fa = open_tap(args.a)
    fb = open_tap(args.b)
    peer = {fa: fb, fb: fa}
    loss_from = {fa: loss_from_a, fb: loss_from_b}
    # queues[dst] holds (due time, frame) for frames to be written to dst.
    queues = {fa: collections.deque(), fb: collections.deque()}
    stats = {"forwarded": 0, "dropped_loss": 0, "dropped_queue": 0,
             "dropped_write": 0}
    # Bytes forwarded per whole second, for the peak rate in the summary.
    sec = [0, 0]  # [current second, bytes in it]
    peak = [0]

    running = [True]

    def stop(_signum, _frame):
        running[0] = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    poller = select.poll()
    poller.register(fa, select.POLLIN)
    poller.register(fb, select.POLLIN)

    print("ready", flush=True)
    deadline = time.monotonic() + args.max_seconds
    monotonic = time.monotonic
    rand = rng.random

    while running[0]:
        now = monotonic()
        if now > deadline:
            break
        # Send whatever is due.
        nxt = None
        for dst, q in queues.items():
            while q and q[0][0] <= now:
                frame = q.popleft()[1]
                try:
                    os.write(dst, frame)
                    stats["forwarded"] += 1
                    t = int(now)
                    if t != sec[0]:
                        if sec[1] > peak[0]:
                            peak[0] = sec[1]
                        sec[0], sec[1] = t, 0
                    sec[1] += len(frame)
                except OSError:
                    # EAGAIN, or EIO while the device is down: the frame is lost.
                    stats["dropped_write"] += 1
            if q and (nxt is None or q[0][0] < nxt):
                nxt = q[0][0]
        if nxt is None:
            timeout_ms = 1000
        else:
            timeout_ms = max(0, math.ceil((nxt - monotonic()) * 1000.0))
        try:
            events = poller.poll(timeout_ms)
        except InterruptedError:
            continue
        now = monotonic()
        due = now + delay
        for fd, _ev in events:
            q = queues[peer[fd]]
            loss = loss_from[fd]
            for _ in range(READ_BURST):
                try:
                    frame = os.read(fd, 65536)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    break
                if not frame:
                    break
                if loss > 0 and rand() < loss:
                    stats["dropped_loss"] += 1
                    continue
                if len(q) >= args.queue_limit:
                    stats["dropped_queue"] += 1
                    continue
                q.append((due, frame))

    t = os.times()
    print("delayline: " + " ".join("%s=%d" % kv for kv in stats.items())
          + " peak_1s_MB=%.1f cpu_user_s=%.1f cpu_sys_s=%.1f"
          % (max(peak[0], sec[1]) / 1e6, t.user, t.system),
          file=sys.stderr, flush=True)
    os.close(fa)
    os.close(fb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
