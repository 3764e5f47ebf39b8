#!/usr/bin/env bash
# Differential test of `downpour daemon` against `aria2c --enable-rpc`: both daemons get the same JSON-RPC calls,
# and a pass of XML-RPC calls at /rpc (scripts/aria2/aria2_differential.py; those labels start with `xmlrpc `), with
# downloads from a real nginx on 127.0.0.1, and every difference in their answers must be listed, with its
# reason, in docs/aria2-differences.tsv; then docs/rpc.md must show that list.
#
# Usage: scripts/aria2/aria2-differential.sh [BINARY [ARGS...]]   (default: .build/release/downpour)
#        ARGS go to aria2_differential.py, e.g. --report to print every difference and not fail.
#
# Needs: nginx, curl, aria2c (apt-get install aria2), python3, coreutils.
set -euo pipefail

die() { echo "aria2-differential: $*" >&2; exit 2; }
note() { echo "aria2-differential: $*" >&2; }
# shellcheck source=scripts/lib/interop.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/../lib/interop.sh"
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd -- "$HERE/../.." && pwd)
[[ $# -gt 0 ]] && shift
ARIA2C=$(command -v aria2c || true)
[[ -n $ARIA2C ]] || die "aria2c not found (apt-get install aria2)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/downpour-aria2-differential.XXXXXX")
NGINX_PID=""
TEST_PID=""

cleanup() {
    local rc=$?
    # The Python side stops its daemons and removes its directory on SIGTERM.
    stop_pid "$TEST_PID" aria2_differential.py
    stop_pid "$NGINX_PID" nginx
    rm -rf -- "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

WWW="$WORK/www"
mkdir -p "$WWW"
head -c 262144 /dev/urandom >"$WWW/small.bin"
# slow.bin stays active for the whole run: 32 MiB at 128 KiB/s per connection, and the test caps the download
# at 200 KiB/s anyway.
head -c 33554432 /dev/urandom >"$WWW/slow.bin"

start_nginx() {
    nginx_interop_conf dir="$WORK" www="$WWW" listen="127.0.0.1:$1" limit_path=/slow.bin limit_rate=128k \
        >"$WORK/nginx.conf" || exit 2
    launch_nginx "$WORK" "$WORK/nginx.conf" "http://127.0.0.1:$1/small.bin"
}
start_on_free_port start_nginx 1 "$WORK"
BASE="http://127.0.0.1:$PORT"
note "nginx on port $PORT"

# In the background and waited for, so that a signal to this script reaches the trap (and the test) at once. The
# test gives up by itself after --deadline (600 s).
python3 "$HERE/aria2_differential.py" --downpour "$BIN" --aria2c "$ARIA2C" --base-url "$BASE" "$@" </dev/null &
TEST_PID=$!
rc=0
wait "$TEST_PID" || rc=$?
TEST_PID=""
docs_rc=0
python3 "$HERE/aria2_differential.py" --check-docs "$ROOT/docs/rpc.md" || docs_rc=$?
if [[ $rc -ne 0 ]]; then
    exit "$rc"
fi
exit "$docs_rc"
