"""The benchmark's case matrix, in one place: the server's settings, the clients, and every case (what it
downloads, from where, with which clients, how long a run may take, how it is summarised).

run.py reads it and runs it; scripts/lib/nginx.sh writes the nginx configuration from SERVER; summarize.py prints
the tables. Templates in `label`, `url`, `extra`, `title`, `summary` and `script` are str.format strings over what
run.py knows when the case runs: {base} {mirror_base} (the two nginx servers), {file} {sha256} {sha512} (a row's
data file), {list} {curl_config} {manifest} {set_dir} (a row's file set), {size} {size_h} {sizes_h} {count} {each}
{each_h} {reps} {binary} {work} {settle}, {rtt} {link} {cc} (lossy), and the server and link settings below
({throttle_rate}, {delay_ms}, ...).
Stdlib only.
"""

from dataclasses import dataclass, field

MIB = 1 << 20


def nginx_rate(bytes_per_s):
    """20971520 -> "20m", 6553600 -> "6400k": the way nginx's limit_rate is written."""
    if bytes_per_s % MIB == 0:
        return f"{bytes_per_s // MIB}m"
    if bytes_per_s % 1024 == 0:
        return f"{bytes_per_s // 1024}k"
    return str(bytes_per_s)


@dataclass(frozen=True)
class ServerSetup:
    """The nginx on 127.0.0.1 (and 127.0.0.2 for the second mirror): limit_rate per connection, in bytes/s."""
    throttle_rate: int = 20 * MIB  # /throttled/: every connection
    fast_rate: int = 100 * MIB  # /fast/: a fast network (4 x 100 MiB/s, about 420 MB/s)
    straggler_rate: int = 1 * MIB  # /straggler/: connections no. 4, 8, 12, ... of each client
    mirror_rate: int = 25 * MIB  # /mirror/ on both servers
    mirror_slow_rate: int = 6400 * 1024  # /mirror-slow/ on the second server: a quarter of mirror_rate

    def nginx_settings(self):
        """KEY=VALUE settings for `scripts/lib/nginx.sh bench-conf`."""
        return [f"{k}={nginx_rate(v)}" for k, v in vars(self).items()]

    def template_values(self):
        return {k: nginx_rate(v) for k, v in vars(self).items()}


@dataclass(frozen=True)
class LinkSetup:
    """A link between two network namespaces (the lossy and far cases): nginx in one, the clients in the other."""
    delay_ms: int = 50  # each way: about 100 ms round trip
    loss_pct: float = 0.5  # each way, or only from the server to the client (data_only)
    data_only: bool = False  # loss only on the data direction (server to client); the requests and ACKs pass
    server_ip: str = "10.203.0.1"
    client_ip: str = "10.203.0.2"
    port: int = 8080

    @property
    def loss_from_server(self):
        return self.loss_pct

    @property
    def loss_from_client(self):
        return 0.0 if self.data_only else self.loss_pct

    def describe(self):
        """"100 ms round trip, 0.5 % loss on the data only" and the like."""
        if self.loss_pct == 0:
            loss = "no loss"
        else:
            loss = f"{self.loss_pct:g} % loss " + ("on the data direction only" if self.data_only else "each way")
        return f"{2 * self.delay_ms} ms round trip ({self.delay_ms} ms each way), {loss}"

    def template_values(self):
        return {"delay_ms": self.delay_ms, "loss_pct": f"{self.loss_pct:g}", "link_h": self.describe()}


SERVER = ServerSetup()
LINK = LinkSetup()


@dataclass(frozen=True)
class DataFile:
    """One file of random bytes, data-SIZE.bin, served from the top of the tree (any location)."""
    size: int  # bytes, times --size-scale, at least 1 MiB


@dataclass(frozen=True)
class FileSet:
    """COUNT files of random bytes in www/DIRECTORY, with an aria2-style URL list, a curl config (url/output
    pairs) and a sha256sum manifest."""
    name: str
    count: int
    size: int  # each, bytes
    prefix: str  # file names: PREFIX0000.bin ...
    directory: str  # under www/ ("" = the top)
    url: str  # template of one file's URL, with {name}
    scaled: bool = True  # --size-scale applies (at least 1 MiB)
    keep: bool = False  # kept until the end (see Case.keep_outputs on deleting many files)


MANY_AT_ONCE = 16
MANY = FileSet("many", count=1000, size=64 * 1024, prefix="f", directory="many", url="{base}/many/{name}",
               scaled=False, keep=True)
RL_OVERALL = 20 * MIB  # --max-overall-download-limit 20M
RL_PER = 10 * MIB  # --max-download-limit 10M
RL_SET = FileSet("rl", count=4, size=50 * MIB, prefix="rl-", directory="", url="{base}/rl/{name}")


@dataclass(frozen=True)
class Row:
    """One client run of a case, once per repetition."""
    label: str
    tool: str  # a key of clients.TOOLS
    connections: int  # -x N, -j N, --parallel-max N, ...
    url: str  # template; several mirrors separated by spaces; for list tools the list or the curl config
    role: str = "main"  # main; ref (a reference the summary compares with); the checksum case's algorithm
    payload: "DataFile | FileSet | None" = None  # None: the case's
    extra: tuple = ()  # more client options (templates)
    limit_bps: int = 0  # the rate limit under test (CSV and summary); 0: none
    needs_floor: bool = False  # only with --floor


# The far-link family's clients: the multi-connection clients at 4, 8 and 16 (aria2c and aria2-next at their best,
# -x N -s N -k 1M), and the single-connection peers.
FAR_CLIENTS = tuple(
    [(f"downpour -x {n}", "downpour", n) for n in (4, 8, 16)]
    + [(f"aria2c -x {n}", "aria2c", n) for n in (4, 8, 16)]
    + [(f"aria2-next -x {n}", "aria2-next", n) for n in (4, 8, 16)]
    + [("curl", "curl", 1), ("wget2", "wget2", 1)]
)

# Every client of the single-file cases.
CLIENTS = tuple(
    [(f"downpour -x {n}", "downpour", n) for n in (1, 4, 8, 16)]
    + [(f"aria2c -x {n}", "aria2c", n) for n in (1, 4, 8, 16)]
    + [(f"aria2-next -x {n}", "aria2-next", n) for n in (1, 4, 8, 16)]
    + [("curl", "curl", 1), ("wget2", "wget2", 1)]
)


def every_client(url):
    return tuple(Row(label, tool, n, url) for label, tool, n in CLIENTS)


@dataclass(frozen=True)
class Timeout:
    """The limit for one client run (--run-timeout overrides it): `fixed` seconds; or 60 s + the largest payload
    / `floor_rate`; or 60 s + `limit_factor` x the longest bytes / limit_bps of a row."""
    fixed: int = 0
    floor_rate: int = 0
    limit_factor: float = 0


@dataclass(frozen=True)
class Case:
    name: str
    about: str  # one line for --help
    title: str = ""  # the summary's heading (template)
    payload: "DataFile | FileSet | None" = None
    rows: tuple = ()
    timeout: Timeout = field(default_factory=Timeout)
    default: bool = True  # runs without --cases
    rotate: bool = True  # each repetition starts one row further down
    count_connections: bool = False  # nginx's /status and conn.log around every run
    align_stragglers: bool = False  # line up nginx's connection numbers before every run
    lossy: bool = False  # clients and nginx in two network namespaces over `link`
    link: LinkSetup = LINK
    family: str = ""  # listing the family's name in --cases runs every case of it
    keep_outputs: bool = False  # a run's files stay until the end (ext4: deleting them slows the next run)
    summary: tuple = ()  # more summarize.py options (templates)
    script: tuple = ()  # a helper in scripts/bench that runs the whole case instead of rows (templates)
    tools: tuple = ()  # commands the helper needs


REPS_MEDIANS = "{reps} rep(s), medians"
GIB = 1024 * MIB
FAR_TITLE = ("{name}: {size_h} ({size} bytes) over {link_h} (TCP connect {rtt}), {link}, TCP {cc}, nginx and "
             "clients in two network namespaces; " + REPS_MEDIANS)


def far_cases():
    """The far-link family (issue 29): round trips of 50, 100 and 200 ms; no loss, 0.5 % on the data direction
    only, 0.5 % each way; 100 MiB (family `far`) and 1 GiB (family `far-1g`). Named far-RTT-LOSS-SIZE, e.g.
    far-100ms-0.5data-100m. Each run also gives its time to the first byte, to full speed and of the last 1 %
    (the client namespace's received bytes, sampled every 2 ms)."""
    out = []
    for family, size, size_name, timeout in (("far", 100 * MIB, "100m", 240), ("far-1g", GIB, "1g", 900)):
        for rtt in (50, 100, 200):
            for loss, data_only, loss_name in ((0.0, False, "0"), (0.5, True, "0.5data"), (0.5, False, "0.5both")):
                link = LinkSetup(delay_ms=rtt // 2, loss_pct=loss, data_only=data_only)
                name = f"far-{rtt}ms-{loss_name}-{size_name}"
                out.append(Case(
                    name, f"{'1 GiB' if size == GIB else '100 MiB'} over {link.describe()}",
                    title=FAR_TITLE.replace("{name}", name), payload=DataFile(size),
                    rows=tuple(Row(label, tool, n, "{base}/{file}") for label, tool, n in FAR_CLIENTS),
                    timeout=Timeout(fixed=timeout), default=False, lossy=True, link=link, family=family))
    return tuple(out)


CASES = (
    Case(
        "unthrottled", "1 GiB, no limits",
        title="unthrottled: {size_h} ({size} bytes), nginx on 127.0.0.1, no limits; " + REPS_MEDIANS,
        payload=DataFile(GIB), rows=every_client("{base}/{file}"), timeout=Timeout(floor_rate=20_000_000)),
    Case(
        "checksum", "the unthrottled file, -x 4 without and with --checksum (sha-256, sha-512); also over "
        "4 x {throttle_rate} and 4 x {fast_rate} links",
        title="checksum: {size_h} ({size} bytes), nginx on 127.0.0.1, no limits (@4x{throttle_rate}, "
        "@4x{fast_rate}: limit_rate per connection); -x 4 (aria2c -x 4 -s 4) without and with "
        "--checksum=TYPE=HEX; " + REPS_MEDIANS,
        payload=DataFile(GIB),
        rows=(
            Row("downpour -x 4", "downpour", 4, "{base}/{file}"),
            Row("downpour -x 4 sha-256", "downpour", 4, "{base}/{file}", role="sha-256",
                extra=("--checksum=sha-256={sha256}",)),
            Row("downpour -x 4 sha-512", "downpour", 4, "{base}/{file}", role="sha-512",
                extra=("--checksum=sha-512={sha512}",)),
            Row("aria2c -x 4", "aria2c", 4, "{base}/{file}"),
            Row("aria2c -x 4 sha-256", "aria2c", 4, "{base}/{file}", role="sha-256",
                extra=("--checksum=sha-256={sha256}",)),
            # A link as fast as a good network, where the hash has the time the bytes take to come.
            Row(f"downpour -x 4 @4x{nginx_rate(SERVER.throttle_rate)}", "downpour", 4, "{base}/throttled/{file}",
                role="main@link"),
            Row(f"downpour -x 4 sha-256 @4x{nginx_rate(SERVER.throttle_rate)}", "downpour", 4,
                "{base}/throttled/{file}", role="sha-256@link", extra=("--checksum=sha-256={sha256}",)),
            # A fast one: the bytes come at a third of loopback's speed.
            Row(f"downpour -x 4 @4x{nginx_rate(SERVER.fast_rate)}", "downpour", 4, "{base}/fast/{file}",
                role="main@fast"),
            Row(f"downpour -x 4 sha-256 @4x{nginx_rate(SERVER.fast_rate)}", "downpour", 4, "{base}/fast/{file}",
                role="sha-256@fast", extra=("--checksum=sha-256={sha256}",)),
        ),
        timeout=Timeout(floor_rate=5_000_000),
        summary=("--target", "1.15")),  # issue 10: 1 GiB with a checksum takes at most 1.15 x as long
    Case(
        "throttled", "100 MiB, every connection limited to {throttle_rate}/s; N curl range requests as the ceiling",
        title="throttled: {size_h} ({size} bytes), limit_rate {throttle_rate} per connection "
        "(sendfile_max_chunk 64k); " + REPS_MEDIANS,
        payload=DataFile(100 * MIB),
        rows=every_client("{base}/throttled/{file}") + tuple(
            Row(f"curl x{n} ranges (ceiling)", "curlranges", n, "{base}/throttled/{file}", role="ref")
            for n in (4, 8, 16)),
        timeout=Timeout(floor_rate=5_000_000),
        summary=("--per-connection-rate", str(SERVER.throttle_rate))),
    Case(
        "straggler", "200 MiB, one connection in four limited to {straggler_rate}/s; an unthrottled ideal for -x 4",
        title="straggler: {size_h} ({size} bytes), connections no. 4, 8, 12, ... of each client limited to "
        "{straggler_rate}/s (so single-connection clients never are); " + REPS_MEDIANS,
        payload=DataFile(200 * MIB),
        rows=every_client("{base}/straggler/{file}") + (
            # The same file served the same way (64k sendfile pieces), with every connection fast.
            Row("downpour -x 4 (ideal)", "downpour", 4, "{base}/chunked/{file}", role="ref"),
            Row("aria2c -x 4 (ideal)", "aria2c", 4, "{base}/chunked/{file}", role="ref"),
        ),
        timeout=Timeout(floor_rate=MIB), align_stragglers=True),
    Case(
        "lossy", "100 MiB over a link with {delay_ms} ms delay and {loss_pct} % loss each way (netem, else "
        "scripts/bench/delayline.py)",
        title="lossy: {size_h} ({size} bytes), {delay_ms} ms delay + {loss_pct} % loss each way (TCP connect "
        "{rtt}), {link}, TCP {cc}, nginx and clients in two network namespaces; " + REPS_MEDIANS,
        payload=DataFile(100 * MIB), rows=every_client("{base}/{file}"), timeout=Timeout(fixed=120), lossy=True),
    *far_cases(),
    Case(
        "manyfiles", "1,000 files of 64 KiB, 16 at a time: time and connections opened",
        title="manyfiles: {count} files of {each} bytes ({size} bytes in all), " + str(MANY_AT_ONCE)
        + " at a time, nginx on 127.0.0.1, no limits; " + REPS_MEDIANS,
        payload=MANY,
        rows=(
            Row(f"downpour -j {MANY_AT_ONCE}", "downpour-list", MANY_AT_ONCE, "{list}", extra=("-x", "1")),
            Row(f"aria2c -j {MANY_AT_ONCE}", "aria2c-list", MANY_AT_ONCE, "{list}", extra=("-x", "1", "-s", "1")),
            Row(f"aria2-next -j {MANY_AT_ONCE}", "aria2-next-list", MANY_AT_ONCE, "{list}",
                extra=("-x", "1", "-s", "1")),
            Row(f"curl --parallel {MANY_AT_ONCE}", "curl-list", MANY_AT_ONCE, "{curl_config}"),
            # Benchmarks/TransportFloor: AsyncHTTPClient alone, writing as curl does and as downpour does.
            Row(f"floor plain {MANY_AT_ONCE}", "floor-plain", MANY_AT_ONCE, "{list}", needs_floor=True),
            Row(f"floor durable {MANY_AT_ONCE}", "floor-durable", MANY_AT_ONCE, "{list}", needs_floor=True),
        ),
        timeout=Timeout(fixed=180), count_connections=True, keep_outputs=True,
        summary=("--slots", str(MANY_AT_ONCE))),
    Case(
        "ratelimit", "4 x 50 MiB under --max-overall-download-limit 20M, 100 MiB under --max-download-limit 10M",
        title="ratelimit: {count} x {each_h} at once under --max-overall-download-limit 20M, and {size_h} ({size} "
        "bytes) under --max-download-limit 10M; nginx on 127.0.0.1, no limits; " + REPS_MEDIANS,
        payload=DataFile(100 * MIB),
        rows=(
            Row("downpour -j 4 overall 20M", "downpour-list", 4, "{list}", role="overall", payload=RL_SET,
                limit_bps=RL_OVERALL, extra=("-x", "1", "--max-overall-download-limit", "20M")),
            Row("aria2c -j 4 overall 20M", "aria2c-list", 4, "{list}", role="overall", payload=RL_SET,
                limit_bps=RL_OVERALL, extra=("-x", "1", "-s", "1", "--max-overall-download-limit=20M")),
            Row("downpour -x 4 per-dl 10M", "downpour", 4, "{base}/rl/{file}", role="per-download",
                limit_bps=RL_PER, extra=("--max-download-limit", "10M")),
            Row("aria2c -x 4 per-dl 10M", "aria2c", 4, "{base}/rl/{file}", role="per-download",
                limit_bps=RL_PER, extra=("--max-download-limit=10M",)),
            Row("aria2-next -j 4 overall 20M", "aria2-next-list", 4, "{list}", role="overall", payload=RL_SET,
                limit_bps=RL_OVERALL, extra=("-x", "1", "-s", "1", "--max-overall-download-limit=20M")),
            Row("aria2-next -x 4 per-dl 10M", "aria2-next", 4, "{base}/rl/{file}", role="per-download",
                limit_bps=RL_PER, extra=("--max-download-limit=10M",)),
        ),
        timeout=Timeout(limit_factor=3), count_connections=True),
    Case(
        "mirrors", "1 GiB from two nginx servers at {mirror_rate}/s per connection, 2 connections per mirror; "
        "and a slow second mirror",
        title="mirrors: {size_h} ({size} bytes), limit_rate {mirror_rate} per connection (slow mirror "
        "{mirror_slow_rate}), 2 connections per mirror; " + REPS_MEDIANS,
        payload=DataFile(GIB),
        rows=(
            Row("downpour 1 mirror -x 2", "downpour-mirrors", 2, "{base}/mirror/{file}"),
            Row("downpour 2 mirrors -x 4", "downpour-mirrors", 4, "{base}/mirror/{file} {mirror_base}/mirror/{file}"),
            Row("aria2c 1 mirror -x 2 -s 2", "aria2c-mirrors", 2, "{base}/mirror/{file}"),
            Row("aria2c 2 mirrors -x 2 -s 4", "aria2c-mirrors", 4, "{base}/mirror/{file} {mirror_base}/mirror/{file}"),
            Row("downpour fast+slow -x 4", "downpour-mirrors", 4,
                "{base}/mirror/{file} {mirror_base}/mirror-slow/{file}"),
            Row("aria2c fast+slow -x 2 -s 4", "aria2c-mirrors", 4,
                "{base}/mirror/{file} {mirror_base}/mirror-slow/{file}"),
            Row("aria2-next 2 mirrors -x 2 -s 4", "aria2-next-mirrors", 4,
                "{base}/mirror/{file} {mirror_base}/mirror/{file}"),
            Row("aria2-next fast+slow -x 2 -s 4", "aria2-next-mirrors", 4,
                "{base}/mirror/{file} {mirror_base}/mirror-slow/{file}"),
        ),
        timeout=Timeout(floor_rate=5_000_000), default=False,
        summary=("--mirrors-log", "{work}/mirrors.log")),
    Case(
        "rss", "downpour -x 4 on 1 GiB and 4 GiB: peak RSS of each",
        title="rss: downpour -x 4, {sizes_h}, nginx on 127.0.0.1, no limits; {reps} rep(s)",
        payload=DataFile(GIB),
        rows=(
            Row("downpour -x 4 @ {size_h}", "downpour", 4, "{base}/{file}"),
            Row("downpour -x 4 @ {size_h}", "downpour", 4, "{base}/{file}", payload=DataFile(4 * GIB)),
        ),
        timeout=Timeout(floor_rate=20_000_000), default=False, rotate=False),
    Case(
        "daemon", "downpour daemon vs aria2c --enable-rpc (rpc_bench.py): adds, latency with 10,000 waiting, "
        "1,000 x 64 KiB over RPC",
        payload=MANY, default=False, tools=("aria2c",),
        script=("rpc_bench.py", "--downpour", "{binary}", "--base", "{base}", "--many-dir", "{set_dir}",
                "--manifest", "{manifest}", "--work", "{work}", "--reps", "{reps}", "--settle", "{settle}")),
    Case(
        "fleet", "downpour daemons on one PostgreSQL queue (fleet_bench.py): 3 nodes capped at a rate against 1 (also "
        "with one killed); 10,000 addUri and read latency, PostgreSQL beside SQLite and aria2c",
        default=False, tools=("aria2c",),
        script=("fleet_bench.py", "--downpour", "{binary}", "--work", "{work}", "--reps", "{reps}")),
    Case(
        "stalled", "downpour daemon vs aria2c --enable-rpc (stall_bench.py): 2,000 half-sent requests",
        default=False, tools=("aria2c",),
        script=("stall_bench.py", "--downpour", "{binary}", "--connections", "2000",
                "--json", "{work}/stalled.json")),
    Case(
        "floods", "downpour daemon vs aria2c --enable-rpc (rpc_flood.py): RSS under 2,000 idle connections, 2,000 "
        "half-sent requests and 300 bodies that announce 2 MB and send 60 KB, before the secret is checked",
        default=False, tools=("aria2c",),
        script=("rpc_flood.py", "--downpour", "{binary}", "--json", "{work}/floods.json")),
    Case(
        "bytes", "bytes nginx sent per byte saved (bytes_bench.py): 1, 6, 20, 30 and 100 MB at -x 2, -x 8, -x 8 at "
        "4 MiB/s a connection and -x 8 from a server without ranges, beside aria2c and aria2-next",
        default=False, tools=("aria2c", "aria2-next"),
        script=("bytes_bench.py", "--downpour", "{binary}", "--work", "{work}", "--json", "{work}/bytes.json")),
    Case(
        "dead", "dead links (dead_bench.py): how fast 1,000 refused and 1,000 NXDOMAIN URLs end, 16 at once, "
        "beside aria2c, curl (and wget2); 10,000 refused URLs through downpour daemon and aria2c --enable-rpc",
        default=False, tools=("aria2c", "curl"),
        script=("dead_bench.py", "--downpour", "{binary}", "--json", "{work}/dead.json")),
    Case(
        "hls", "HLS (hls_bench.py): a 123 MB video of 30 segments made by ffmpeg, beside yt-dlp (alone and -N 8) and "
        "ffmpeg -c copy, to a durable file, without limits and at 4 MiB/s a connection",
        default=False, tools=("ffmpeg", "yt-dlp"),
        script=("hls_bench.py", "--downpour", "{binary}", "--work", "{work}", "--reps", "{reps}",
                "--json", "{work}/hls.json")),
    Case(
        "media", "HLS (hls_bench.py), issue 44's media case: a 10-minute stream at 5 Mbit/s (300 segments, about "
        "375 MB) on loopback and over 100 ms links (no loss; 0.5 % on the data), beside yt-dlp (alone, -N 8, -N 16), "
        "ffmpeg -c copy and aria2-next; time, CPU, peak RSS, and the bytes sent twice after a kill -9 at 40 %",
        default=False, tools=("ffmpeg", "yt-dlp", "aria2-next"),
        script=("hls_bench.py", "--downpour", "{binary}", "--work", "{work}", "--reps", "{reps}", "--seconds", "600",
                "--bitrate", "5M", "--modes", "unlimited,far,far-loss", "--kill", "--clients",
                "downpour,downpour -x 16,yt-dlp,yt-dlp -N 8,yt-dlp -N 16,ffmpeg -c copy,aria2-next", "--json",
                "{work}/media.json")),
)

BY_NAME = {c.name: c for c in CASES}
FAMILIES = {f: tuple(c.name for c in CASES if c.family == f) for f in dict.fromkeys(c.family for c in CASES if c.family)}
