#!/usr/bin/env python3
"""Summarises the raw runs that the benchmark (scripts/bench/run.py) wrote to its CSV (stdlib only).

    summarize.py --csv FILE --case NAME [--title TEXT] [--rss-limit-mb 32]
                 [--per-connection-rate B/S] [--slots N] [--target 1.15] [--mirrors-log FILE]

Prints one table for the case (medians over the runs that succeeded), then the
ratios: Downpour/aria2c throughput at the same number of connections, Downpour's
best throughput over the best peer's, and for rows that have an "ideal"
reference (role "ref") the ratio of the median times. For the `rss` case it
prints the peak RSS per file size and whether it stays under the limit. For
`manyfiles`: Downpour's time over aria2c's and curl's, and the connections each
client used per download slot (from nginx's log). For `ratelimit`: each row's
achieved rate over its limit, from the wall time and from nginx's log. For
`checksum`: each tool's median time and CPU with a checksum (role = the
algorithm) over without (role "main"), the same ratio per repetition, and
whether downpour's sha-256 ratio is within --target. For `mirrors` with
--mirrors-log (the second nginx server's log): how much of the file the second
mirror served, per client and mirror speed, over all repetitions.

MB = 10^6 bytes everywhere (throughput and RSS).
"""

import argparse
import csv
import statistics
import sys


def fnum(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, width, prec):
    if v is None:
        return "-".rjust(width)
    return ("%*.*f" % (width, prec, v))


def load(path, case):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["case"] == case:
                rows.append(r)
    return rows


def group(rows):
    """client label -> dict of aggregated values, in first-seen order of `seq`."""
    order = []
    groups = {}
    for r in sorted(rows, key=lambda r: int(r["client_index"])):
        key = r["client"]
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(r)
    out = []
    for key in order:
        runs = groups[key]
        good = [r for r in runs if r["status"] == "ok"]
        bad = [r for r in runs if r["status"] != "ok"]
        size = int(runs[0]["size_bytes"])
        wall = med([fnum(r["wall_s"]) for r in good])
        # To a durable file: the run and the sync after it (CSVs of older runs have no sync_s).
        durable = [fnum(r["wall_s"]) + fnum(r["sync_s"]) for r in good if fnum(r.get("sync_s")) is not None]
        rss = [fnum(r["max_rss_kb"]) for r in good]
        rss = [v for v in rss if v is not None]
        out.append({
            "client": key,
            "tool": runs[0]["tool"],
            "connections": int(runs[0]["connections"]),
            "role": runs[0]["role"],
            "size": size,
            "runs": len(runs),
            "good": len(good),
            "bad_status": sorted({r["status"] for r in bad}),
            "wall": wall,
            "durable": med(durable) if durable else None,
            "mbps": (size / wall / 1e6) if wall else None,
            "cpu": med([fnum(r["cpu_s"]) for r in good]),
            "rss_mb": (max(rss) * 1024 / 1e6) if rss else None,
            "rss_all_mb": [v * 1024 / 1e6 for v in rss],
            # manyfiles / ratelimit only (empty elsewhere): the rate limit
            # under test, connections and requests seen by nginx, and its
            # first-request-start to last-request-end span.
            "limit": fnum(runs[0].get("limit_bps")),
            "conns": med([fnum(r.get("log_conns")) for r in good]),
            "accepted": med([fnum(r.get("accepted_conns")) for r in good]),
            "requests": med([fnum(r.get("log_requests")) for r in good]),
            "server_s": med([fnum(r.get("server_s")) for r in good]),
            "walls": [fnum(r["wall_s"]) for r in good if fnum(r["wall_s"])],
            "server_all": [fnum(r.get("server_s")) for r in good if fnum(r.get("server_s"))],
            # Cases over a link (lossy, far-*): the timeline from the received bytes.
            "first_byte": med([fnum(r.get("first_byte_s")) for r in good]),
            "first_10pct": med([fnum(r.get("first_10pct_s")) for r in good]),
            "full_speed": med([fnum(r.get("full_speed_s")) for r in good]),
            "last_1pct": med([fnum(r.get("last_1pct_s")) for r in good]),
            # ... and from nginx's side: when the N-th connection asked, segments retransmitted, time-outs.
            "all_asking": med([fnum(r.get("all_asking_s")) for r in good]),
            "retrans": med([fnum(r.get("retrans_segs")) for r in good]),
            "rtos": med([fnum(r.get("rtos")) for r in good]),
        })
    return out


def print_table(stats, extra=()):
    """extra: (header, key, precision) columns added before "sha ok"."""
    w = max([len("client")] + [len(s["client"]) for s in stats])
    head = "%-*s  %5s  %9s  %9s  %8s  %7s  %11s" % (
        w, "client", "runs", "median s", "durable s", "MB/s", "CPU s", "peak RSS MB")
    for h, _, _ in extra:
        head += "  %*s" % (max(len(h), 6), h)
    print(head + "  sha ok")
    for s in stats:
        if s["good"] == s["runs"]:
            ok = "ok"
        else:
            ok = "FAIL %d/%d (%s)" % (s["runs"] - s["good"], s["runs"],
                                      ",".join(s["bad_status"]))
        line = "%-*s  %5s  %s  %s  %s  %s  %s" % (
            w, s["client"], "%d/%d" % (s["good"], s["runs"]),
            fmt(s["wall"], 9, 3), fmt(s["durable"], 9, 3), fmt(s["mbps"], 8, 1), fmt(s["cpu"], 7, 2),
            fmt(s["rss_mb"], 11, 1))
        for h, key, prec in extra:
            line += "  " + fmt(s[key], max(len(h), 6), prec)
        print(line + "  " + ok)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def print_ratios(stats, per_connection_rate=None):
    main = [s for s in stats if s["role"] == "main"]
    dp = {s["connections"]: s for s in main if s["tool"] == "downpour"}
    ar = {s["connections"]: s for s in main if s["tool"] == "aria2c"}
    parts = []
    cpu_parts = []
    for n in sorted(set(dp) & set(ar)):
        r = ratio(dp[n]["mbps"], ar[n]["mbps"])
        parts.append("x%d %s" % (n, "-" if r is None else "%.2f" % r))
        c = ratio(dp[n]["cpu"], ar[n]["cpu"])
        cpu_parts.append("x%d %s" % (n, "-" if c is None else "%.2f" % c))
    if parts:
        print("Downpour/aria2c throughput, same N (>1 = Downpour faster): "
              + "  ".join(parts))
        print("Downpour/aria2c CPU seconds, same N (<1 = Downpour cheaper): "
              + "  ".join(cpu_parts))
    singles = [s for s in main if s["tool"] in ("curl", "wget2") and s["mbps"]]
    if 4 in dp and dp[4]["mbps"] and singles:
        print("Downpour -x 4 / single-connection peers: "
              + "  ".join("%s %.2f" % (s["client"], dp[4]["mbps"] / s["mbps"]) for s in singles))
    if per_connection_rate:
        shares = []
        for n in sorted(dp):
            if dp[n]["mbps"]:
                shares.append("x%d %.3f" % (n, dp[n]["mbps"] * 1e6 / (n * per_connection_rate)))
        for n in sorted(ar):
            if ar[n]["mbps"]:
                shares.append("aria2c x%d %.3f" % (n, ar[n]["mbps"] * 1e6 / (n * per_connection_rate)))
        print("throughput / (N x per-connection limit): " + "  ".join(shares))
    dps = [s for s in main if s["tool"] in ("downpour", "downpour-mirrors") and s["mbps"]]
    peers = [s for s in main if s["tool"] not in ("downpour", "downpour-mirrors") and s["mbps"]]
    if dps and peers:
        bd = max(dps, key=lambda s: s["mbps"])
        bp = max(peers, key=lambda s: s["mbps"])
        print("Downpour best / best peer throughput: %.2f (%s %.1f MB/s vs %s %.1f MB/s)"
              % (bd["mbps"] / bp["mbps"], bd["client"], bd["mbps"],
                 bp["client"], bp["mbps"]))
    elif dps or peers:
        print("Downpour best / best peer throughput: - (no successful runs on one side)")
    durable_dps = [s for s in dps if s["durable"]]
    durable_peers = [s for s in peers if s["durable"]]
    if durable_dps and durable_peers:
        bd = min(durable_dps, key=lambda s: s["durable"])
        bp = min(durable_peers, key=lambda s: s["durable"])
        print("Downpour best / best peer, time to a durable file: %.2f (%s %.3f s vs %s %.3f s; <1 = Downpour "
              "sooner)" % (bd["durable"] / bp["durable"], bd["client"], bd["durable"], bp["client"], bp["durable"]))
    refs = [s for s in stats if s["role"] == "ref"]
    ceilings = {s["connections"]: s for s in refs if s["tool"] == "curlranges"}
    if ceilings:
        parts = []
        for n in sorted(ceilings):
            c = ceilings[n]
            share = c["mbps"] * 1e6 / (n * per_connection_rate) if per_connection_rate and c["mbps"] else None
            r = ratio(dp[n]["mbps"], c["mbps"]) if n in dp else None
            parts.append("x%d: ceiling %s of N x limit, downpour/ceiling %s"
                         % (n, "-" if share is None else "%.3f" % share, "-" if r is None else "%.2f" % r))
        print("ceiling (N curl range requests at once, no probe): " + ";  ".join(parts))
    for ref in refs:
        if ref["tool"] == "curlranges":
            continue
        base = ref["client"].replace(" (ideal)", "")
        m = next((s for s in main if s["client"] == base), None)
        if m is None:
            continue
        r = ratio(m["wall"], ref["wall"])
        print("straggler/ideal time, %s: %s (%s s with a straggler vs %s s unthrottled)"
              % (base, "-" if r is None else "%.2f" % r,
                 fmt(m["wall"], 0, 3), fmt(ref["wall"], 0, 3)))


def print_timeline(stats, rtt_ms):
    """Over a link: when each client reached full speed, against aria2c at the same N, in round trips."""
    main = [s for s in stats if s["role"] == "main"]
    dp = {s["connections"]: s for s in main if s["tool"] == "downpour"}
    ar = {s["connections"]: s for s in main if s["tool"] == "aria2c"}
    parts = []
    for n in sorted(set(dp) & set(ar)):
        a, d = ar[n]["full_speed"], dp[n]["full_speed"]
        if a is None or d is None:
            parts.append("x%d -" % n)
        else:
            parts.append("x%d %+.3f s (%+.1f RTT)" % (n, a - d, (a - d) * 1000 / rtt_ms))
    if parts:
        print("Downpour at full speed sooner than aria2c, same N (>0 = sooner; RTT %g ms): %s"
              % (rtt_ms, "  ".join(parts)))
    parts = []
    for n in sorted(set(dp) & set(ar)):
        a, d = ar[n].get("first_10pct"), dp[n].get("first_10pct")
        if a is not None and d is not None:
            parts.append("x%d %+.3f s (%+.1f RTT)" % (n, a - d, (a - d) * 1000 / rtt_ms))
    if parts:
        print("Downpour has its first 10 %% sooner than aria2c, same N (>0 = sooner): %s" % "  ".join(parts))
    ahead = [n for n in sorted(set(dp) & set(ar)) if dp[n]["mbps"] and ar[n]["mbps"]]
    if ahead:
        behind = [n for n in ahead if dp[n]["mbps"] <= ar[n]["mbps"]]
        print("Downpour ahead of aria2c at every N: %s" % ("yes" if not behind else
                                                           "NO (x%s)" % ", x".join(map(str, behind))))


def yes_no(ok):
    return "yes" if ok else "NO"


def print_manyfiles(stats, slots):
    """Time ratios against aria2c, aria2-next and curl, and connections per slot."""
    dp = next((s for s in stats if s["tool"] == "downpour-list"), None)
    ar = next((s for s in stats if s["tool"] == "aria2c-list"), None)
    cu = next((s for s in stats if s["tool"] == "curl-list"), None)
    if dp is not None and ar is not None:
        r = ratio(dp["wall"], ar["wall"])
        if r is None:
            print("time downpour/aria2c: - (no successful runs on one side)")
        else:
            print("time downpour/aria2c: %.2f (downpour %.2fx as fast; target >= 2x: %s)"
                  % (r, 1 / r, yes_no(1 / r >= 2)))
    an = next((s for s in stats if s["tool"] == "aria2-next-list"), None)
    if dp is not None and an is not None:
        r = ratio(dp["wall"], an["wall"])
        print("time downpour/aria2-next: - (no successful runs on one side)" if r is None else
              "time downpour/aria2-next: %.2f (downpour %.2fx as fast)" % (r, 1 / r))
    if dp is not None and cu is not None:
        r = ratio(dp["wall"], cu["wall"])
        if r is None:
            print("time downpour/curl: - (no successful runs on one side)")
        else:
            print("time downpour/curl: %.2f (downpour %.2fx as fast; target <= 1.00: %s)"
                  % (r, 1 / r, yes_no(r <= 1.0)))
        r = ratio(dp["durable"], cu["durable"]) if dp["durable"] and cu["durable"] else None
        if r is not None:
            print("time to durable files downpour/curl (curl's run and a sync -f after it): %.2f (target <= 1.00: %s)"
                  % (r, yes_no(r <= 1.0)))
    parts = []
    for s in stats:
        if s["conns"] is None:
            parts.append("%s -" % s["client"])
            continue
        per = s["conns"] / slots
        t = ("; target <= 2: %s" % yes_no(per <= 2)) if s is dp else ""
        parts.append("%s %.2f (%g conns, %s accepted%s)"
                     % (s["client"], per, s["conns"],
                        "-" if s["accepted"] is None else "%g" % s["accepted"], t))
    print("connections per slot (distinct $connection in nginx's log / %d; medians): " % slots
          + ";  ".join(parts))


def print_ratelimit(stats):
    """Achieved rate / limit, from wall time and from nginx's log."""
    for s in stats:
        if s["limit"] is None:
            continue
        is_dp = s["tool"].startswith("downpour")
        lim = "%g MiB/s" % (s["limit"] / 1048576)
        pieces = []
        for what, med_t, all_t in (("wall time", s["wall"], s["walls"]),
                                   ("nginx log", s["server_s"], s["server_all"])):
            if not med_t:
                pieces.append("%s -" % what)
                continue
            r = s["size"] / med_t / s["limit"]
            rs = sorted(s["size"] / t / s["limit"] for t in all_t)
            rng = " [%.3f-%.3f]" % (rs[0], rs[-1]) if len(rs) > 1 else ""
            t = ("; target 0.90-1.02: %s" % yes_no(0.90 <= r <= 1.02)) if is_dp else ""
            pieces.append("%s %.3f%s%s" % (what, r, rng, t))
        print("rate/limit %s (%s, %d bytes): %s" % (s["client"], lim, s["size"], ";  ".join(pieces)))
    print("  (wall time: around the process, so it includes start-up and the probe; nginx log: first request's"
          " start to the last one's end, from $msec - $request_time; [min-max] over the runs)")


def print_checksum(stats, rows, target):
    """Time and CPU with a checksum over without, per tool and link (a role "KIND@LINK" is paired with
    "main@LINK"; no "@": the unlimited link); the target for downpour's sha-256 on each link."""
    def split(role):
        kind, _, link = role.partition("@")
        return kind, link
    base = {(s["tool"], split(s["role"])[1]): s for s in stats if split(s["role"])[0] == "main"}
    # (client label, repetition) -> wall time of an ok run, to pair the runs of one repetition.
    walls = {(r["client"], r["rep"]): fnum(r["wall_s"]) for r in rows if r["status"] == "ok"}
    reps = sorted({r["rep"] for r in rows}, key=int)
    targets = []
    for s in stats:
        kind, link = split(s["role"])
        b = base.get((s["tool"], link))
        if kind == "main" or b is None:
            continue
        r = ratio(s["wall"], b["wall"])
        c = ratio(s["cpu"], b["cpu"])
        per = sorted(ratio(walls.get((s["client"], k)), walls.get((b["client"], k))) for k in reps
                     if ratio(walls.get((s["client"], k)), walls.get((b["client"], k))) is not None)
        rng = " [%.2f-%.2f per rep]" % (per[0], per[-1]) if len(per) > 1 else ""
        rss = (s["rss_mb"] - b["rss_mb"]) if s["rss_mb"] is not None and b["rss_mb"] is not None else None
        print("with / without, %s: time %s%s (%s s vs %s s); CPU %s (%s s vs %s s); peak RSS %s MB"
              % (s["client"], "-" if r is None else "%.2f" % r, rng, fmt(s["wall"], 0, 3), fmt(b["wall"], 0, 3),
                 "-" if c is None else "%.2f" % c, fmt(s["cpu"], 0, 2), fmt(b["cpu"], 0, 2),
                 "-" if rss is None else "%+.1f" % rss))
        if s["tool"] == "downpour" and kind == "sha-256":
            targets.append((r, s["client"], b["client"]))
    for r, with_c, without_c in targets:
        if r is None:
            print("target <= %g: - (no successful runs on one side)" % target)
        else:
            print("target <= %g: %s (%s / %s median time = %.3f)"
                  % (target, yes_no(r <= target), with_c, without_c, r))


def print_rss(stats, limit_mb):
    rows = [s for s in stats if s["tool"] == "downpour"]
    if not rows:
        return
    for s in rows:
        allv = ", ".join("%.1f" % v for v in s["rss_all_mb"]) or "-"
        print("peak RSS %s (%d bytes): max %s MB over %d run(s) [%s]"
              % (s["client"], s["size"], fmt(s["rss_mb"], 0, 1), s["good"], allv))
    vals = [s["rss_mb"] for s in rows if s["rss_mb"] is not None]
    if vals:
        top = max(vals)
        mib = top * 1e6 / 1048576
        print("peak RSS <= %g MB: %s (largest %.1f MB = %.1f MiB; <= %g MiB: %s)"
              % (limit_mb, "yes" if top <= limit_mb else "NO", top, mib, limit_mb,
                 "yes" if mib <= limit_mb else "NO"))
    if len(rows) >= 2 and rows[0]["rss_mb"] is not None and rows[-1]["rss_mb"] is not None:
        small, big = rows[0], rows[-1]
        growth = big["rss_mb"] - small["rss_mb"]
        print("growth %s -> %s: %+.1f MB (%.2fx the file size, %.2fx the RSS)"
              % (small["client"], big["client"], growth, big["size"] / small["size"],
                 big["rss_mb"] / small["rss_mb"]))


def print_mirror_share(rows, log):
    """The second mirror's share of the bytes: body bytes in its log (user agent|uri|status|bytes) over the file
    size times the repetitions."""
    total = len({r["rep"] for r in rows}) * int(rows[0]["size_bytes"])
    sent = {}
    with open(log) as f:
        for line in f:
            fields = line.rstrip("\n").split("|")
            if len(fields) < 4 or fnum(fields[3]) is None:
                continue
            client = ("aria2c" if fields[0].startswith("aria2") else
                      "downpour" if fields[0].startswith("downpour") else "other")
            where = "slow" if fields[1].startswith("/mirror-slow/") else "same-speed"
            sent[client, where] = sent.get((client, where), 0) + fnum(fields[3])
    keys = [("downpour", "same-speed"), ("aria2c", "same-speed"), ("downpour", "slow"), ("aria2c", "slow")]
    print("second mirror's share of the bytes (its log, body bytes / file size, all reps):"
          + "".join("  %s %s %.3f" % (c, w, sent.get((c, w), 0) / total) for c, w in keys))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--case", required=True)
    ap.add_argument("--title", default=None)
    ap.add_argument("--rss-limit-mb", type=float, default=32.0)
    ap.add_argument("--per-connection-rate", type=float, default=None,
                    help="bytes per second each connection is limited to (throttled case)")
    ap.add_argument("--slots", type=int, default=16,
                    help="downloads at a time (manyfiles: connections per slot)")
    ap.add_argument("--target", type=float, default=1.15,
                    help="checksum: the most downpour's sha-256 time may be over its time without")
    ap.add_argument("--rtt-ms", type=float, default=None,
                    help="cases over a link: its round trip, for the timeline's columns and comparison")
    ap.add_argument("--mirrors-log", default=None,
                    help="mirrors: the second server's log, for the second mirror's share of the bytes")
    args = ap.parse_args()
    rows = load(args.csv, args.case)
    print()
    print("== %s ==" % (args.title or args.case))
    if not rows:
        print("(no runs)")
        return 0
    stats = group(rows)
    if args.case == "manyfiles":
        print_table(stats, (("conns", "conns", 0), ("accepted", "accepted", 0),
                            ("requests", "requests", 0)))
        print_manyfiles(stats, args.slots)
    elif args.case == "ratelimit":
        print_table(stats, (("conns", "conns", 0), ("server s", "server_s", 3)))
        print_ratelimit(stats)
    elif args.case == "checksum":
        print_table(stats)
        print_checksum(stats, rows, args.target)
    elif args.case == "rss":
        print_table(stats)
        print_rss(stats, args.rss_limit_mb)
    elif args.rtt_ms:
        print_table(stats, (("1st byte s", "first_byte", 3), ("10% in s", "first_10pct", 3),
                            ("full speed s", "full_speed", 3),
                            ("last 1% s", "last_1pct", 3), ("N asking s", "all_asking", 3),
                            ("retrans", "retrans", 0), ("RTOs", "rtos", 0)))
        print_ratios(stats, args.per_connection_rate)
        print_timeline(stats, args.rtt_ms)
    else:
        print_table(stats)
        print_ratios(stats, args.per_connection_rate)
    if args.mirrors_log:
        print_mirror_share(rows, args.mirrors_log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
