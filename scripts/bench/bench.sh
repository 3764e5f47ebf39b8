#!/usr/bin/env bash
# Benchmark: the downpour CLI (and daemon) against aria2c, curl and wget2, downloading from a private nginx.
#
# Usage: scripts/bench/bench.sh [--binary PATH] [--reps N] [--cases LIST] [--size-scale F] [--csv FILE]
#                         [--run-timeout S] [--lossy-cc ALGO] [--settle S] [--floor PATH] [--install-deps]
#
# The entry point of scripts/bench/run.py (the driver; --help lists the options and the cases). The cases are
# in scripts/bench/cases.py; nginx's configuration is written by scripts/lib/nginx.sh. Nothing is installed
# unless --install-deps is given. See Benchmarks/README.md.
set -euo pipefail

RUN="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)/run.py"

if ! command -v python3 >/dev/null; then
    if [[ " $* " != *" --install-deps "* ]]; then
        echo "bench: missing: python3 (package python3); install it, or run again with --install-deps" >&2
        exit 2
    fi
    sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo -n)
    echo "bench: installing Debian packages: python3" >&2
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null >&2
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 \
        </dev/null >&2
fi

export LC_ALL=C PYTHONDONTWRITEBYTECODE=1
exec python3 "$RUN" "$@"
