#!/usr/bin/env bash
# Interoperability test of `downpour daemon` with real aria2 clients: aria2p
# (PyPI), its command line and its library, and two XML-RPC clients (Python's
# xmlrpc.client, aiohttp-xmlrpc from PyPI), against a real nginx on 127.0.0.1.
#
# Usage: scripts/interop/daemon-interop.sh [BINARY]     (default: .build/release/downpour)
#
# Needs: nginx, curl, python3 with aria2p and aiohttp-xmlrpc (pip install aria2p aiohttp-xmlrpc==1.5.0), coreutils.
set -euo pipefail

die() { echo "daemon-interop: $*" >&2; exit 2; }
note() { echo "daemon-interop: $*" >&2; }
# shellcheck source=scripts/lib/interop.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/../lib/interop.sh"
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
command -v aria2p >/dev/null || die "aria2p not found (pip install aria2p)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/downpour-daemon-interop.XXXXXX")
NGINX_PID=""
DAEMON_PID=""
LOG="$WORK/case.log"

cleanup() {
    local rc=$?
    stop_pid "$DAEMON_PID" daemon
    stop_pid "$NGINX_PID" nginx
    rm -rf -- "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

WWW="$WORK/www"
OUT="$WORK/out"
STATE="$WORK/state"
mkdir -p "$WWW" "$OUT" "$STATE"
head -c 3145728 /dev/urandom >"$WWW/small.bin"
head -c 16777216 /dev/urandom >"$WWW/slow.bin"
SMALL_SHA256=$(sha_of "$WWW/small.bin")
SLOW_SHA256=$(sha_of "$WWW/slow.bin")
export SMALL_SHA256 SLOW_SHA256

start_nginx() {
    nginx_interop_conf dir="$WORK" www="$WWW" listen="127.0.0.1:$1" limit_path=/slow.bin limit_rate=256k \
        >"$WORK/nginx.conf" || exit 2
    launch_nginx "$WORK" "$WORK/nginx.conf" "http://127.0.0.1:$1/small.bin"
}
start_on_free_port start_nginx 1 "$WORK"
BASE="http://127.0.0.1:$PORT"

SECRET="interop-$RANDOM$RANDOM"
# start_daemon: runs the daemon on a port of its choosing (it prints where it listens), sets DAEMON_PID,
# RPC_PORT and A2 (aria2p with the daemon's port and secret).
start_daemon() {
    "$BIN" daemon --rpc-listen-port 0 --rpc-secret "$SECRET" --state-dir "$STATE" -d "$OUT" -j 3 \
        >"$WORK/daemon.out" 2>"$WORK/daemon.err" </dev/null &
    DAEMON_PID=$!
    RPC_PORT=""
    for ((i = 0; i < 100; i++)); do
        RPC_PORT=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\)/jsonrpc.*|\1|p' "$WORK/daemon.out" | head -n 1)
        [[ -n $RPC_PORT ]] && break
        kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$WORK/daemon.err" >&2; die "the daemon exited"; }
        sleep 0.1
    done
    [[ -n $RPC_PORT ]] || die "the daemon did not say where it listens"
    A2=(aria2p --port "$RPC_PORT" --secret "$SECRET" --client-timeout 10)
}
start_daemon
note "daemon on port $RPC_PORT, nginx on $PORT"

# ------------------------------------------------------------- aria2p's CLI
run_case() {
    local name=$1
    shift
    if timeout -k 5 "$CASE_TIMEOUT" "$@" >"$LOG" 2>&1; then pass "$name"; else fail "$name ($(describe_rc $?))"; fi
}

# first_gid METHOD JSON_PARAMS: the GID of the first download that `aria2p call` lists, or nothing.
first_gid() {
    "${A2[@]}" call "$1" -J "$2" 2>/dev/null | python3 -c \
        'import json,sys; print(next((d["gid"] for d in json.load(sys.stdin)), ""))' 2>/dev/null || true
}

run_case "aria2p add" "${A2[@]}" add "$BASE/small.bin"
GID=""
for ((i = 0; i < 100; i++)); do
    GID=$(first_gid tellStopped '[0, 10, ["gid"]]')
    [[ -n $GID ]] && break
    sleep 0.1
done
if [[ -n $GID ]] && cmp -s "$WWW/small.bin" "$OUT/small.bin"; then
    pass "aria2p add: $GID finished, file identical"
else
    fail "aria2p add: no finished download or the file differs"
fi
run_case "aria2p show" "${A2[@]}" show
if grep -q "small.bin" "$LOG"; then pass "aria2p show lists small.bin"; else fail "aria2p show does not list small.bin"; fi

run_case "aria2p add slow.bin" "${A2[@]}" add "$BASE/slow.bin"
SLOW=""
for ((i = 0; i < 100; i++)); do
    SLOW=$(first_gid tellActive '[["gid"]]')
    [[ -n $SLOW ]] && break
    sleep 0.1
done
if [[ -n $SLOW ]]; then
    run_case "aria2p pause $SLOW" "${A2[@]}" pause "$SLOW"
    STATUS=$("${A2[@]}" call tellStatus -J "[\"$SLOW\", [\"status\"]]" 2>/dev/null)
    if [[ $STATUS == *paused* ]]; then pass "aria2p pause: status paused"; else fail "aria2p pause: status $STATUS"; fi
    run_case "aria2p resume $SLOW" "${A2[@]}" resume "$SLOW"
    STATUS=$("${A2[@]}" call tellStatus -J "[\"$SLOW\", [\"status\"]]" 2>/dev/null)
    if [[ $STATUS == *active* || $STATUS == *waiting* ]]; then
        pass "aria2p resume: status ${STATUS//[$'\n ']/}"
    else
        fail "aria2p resume: status $STATUS"
    fi
    run_case "aria2p remove $SLOW" "${A2[@]}" remove --force "$SLOW"
    for ((i = 0; i < 50; i++)); do
        [[ -e $OUT/slow.bin.part ]] || break
        sleep 0.1
    done
    if [[ ! -e $OUT/slow.bin.part ]]; then pass "aria2p remove: no .part left"; else fail "aria2p remove left slow.bin.part"; fi
else
    fail "aria2p add slow.bin: not active"
fi
run_case "aria2p purge" "${A2[@]}" purge
STOPPED=$("${A2[@]}" call tellStopped -J '[0, 10]' 2>/dev/null | tr -d ' \n')
if [[ $STOPPED == "[]" ]]; then pass "aria2p purge: no results left"; else fail "aria2p purge: $STOPPED"; fi

# ---------------------------------------------------------- aria2p's library
if timeout -k 5 300 python3 "$HERE/aria2p_check.py" "$RPC_PORT" "$SECRET" "$BASE" "$OUT" >"$LOG" 2>&1; then
    sed 's/^/     /' "$LOG"
    pass "aria2p library: add, notifications, pause, resume, error, remove, purge"
else
    fail "aria2p library"
fi

# ------------------------------------------- XML-RPC at /rpc: two real clients
# Python's xmlrpc.client (aria2's manual's examples) and aiohttp-xmlrpc from PyPI (lxml writes its requests).
if timeout -k 5 360 python3 "$HERE/xmlrpc_check.py" --url "http://127.0.0.1:$RPC_PORT/rpc" --secret "$SECRET" \
    --base-url "$BASE" >"$LOG" 2>&1; then
    sed 's/^/     /' "$LOG" | tail -n 3
    pass "XML-RPC: xmlrpc.client and aiohttp-xmlrpc, every check"
else
    sed 's/^/     /' "$LOG" | grep -v '^     ok ' | tail -n 40
    fail "XML-RPC clients"
fi

# ------------------------------------- graceful stop (SIGTERM) mid-download

"${A2[@]}" add "$BASE/slow.bin" --options "out=slow-3.bin" >/dev/null 2>&1 || true
LAST=""
for ((i = 0; i < 100; i++)); do
    LAST=$(first_gid tellActive '[["gid","completedLength"]]')
    [[ -n $LAST && -e $OUT/slow-3.bin.part ]] && break
    sleep 0.1
done
START_NS=$(date +%s%N)
kill -TERM "$DAEMON_PID"
rc=0
wait "$DAEMON_PID" || rc=$?
ELAPSED_MS=$((($(date +%s%N) - START_NS) / 1000000))
DAEMON_PID=""
if [[ -n $LAST && $rc -eq 0 && $ELAPSED_MS -le 3000 ]]; then
    pass "SIGTERM with $LAST downloading: exit 0 after ${ELAPSED_MS} ms"
else
    fail "SIGTERM: download '$LAST', exit $rc after ${ELAPSED_MS} ms (want 0 within 3000 ms)"
    sed 's/^/     | /' "$WORK/daemon.err" | tail -n 20
fi
if [[ -e $OUT/slow-3.bin.part && -e $OUT/slow-3.bin.part.downpour ]]; then
    pass "SIGTERM: the .part and its journal are kept"
else
    fail "SIGTERM: no .part or journal left for slow-3.bin"
fi

# Restarted, the daemon has the same download, running again, and it completes from where it stopped.
start_daemon
STATUS=$("${A2[@]}" call tellStatus -J "[\"$LAST\", [\"status\"]]" 2>/dev/null | tr -d ' \n')
if [[ $STATUS == *active* ]]; then pass "restart: $LAST is active again"; else fail "restart: $LAST is $STATUS"; fi
for ((i = 0; i < 600; i++)); do
    STATUS=$("${A2[@]}" call tellStatus -J "[\"$LAST\", [\"status\"]]" 2>/dev/null | tr -d ' \n')
    [[ $STATUS == *complete* || $STATUS == *error* ]] && break
    sleep 0.1
done
if [[ $STATUS == *complete* ]] && cmp -s "$WWW/slow.bin" "$OUT/slow-3.bin"; then
    pass "restart: $LAST completed, file identical"
else
    fail "restart: $LAST is $STATUS, or the file differs"
fi
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || true
DAEMON_PID=""

echo
echo "daemon-interop: $PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
