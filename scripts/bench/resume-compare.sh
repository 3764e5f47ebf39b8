#!/usr/bin/env bash
# How much does a client fetch twice when it is killed with SIGKILL halfway through and run again?
# Downpour -x 8 against aria2c -x 8, same nginx on loopback, same 200 MiB file, each connection throttled
# to 2 MiB/s so that "halfway" is a moment, not a blur. Prints the re-fetched bytes and checks SHA-256.
#
# Usage: scripts/bench/resume-compare.sh [BINARY]        (default: .build/release/downpour)
# Needs: nginx, aria2, curl, ss (apt-get install nginx aria2 curl iproute2).
set -euo pipefail

BIN=${1:-.build/release/downpour}
case $BIN in /*) ;; *) BIN="$PWD/$BIN" ;; esac
[[ -x $BIN ]] || { echo "no binary at $BIN (swift build -c release --product downpour)" >&2; exit 2; }
for tool in nginx aria2c curl; do
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install nginx aria2 curl)" >&2; exit 2; }
done
SIZE_MIB=${SIZE_MIB:-200}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/downpour-resume.XXXXXX")
NGINX_PID=""
cleanup() {
    [[ -n $NGINX_PID ]] && kill "$NGINX_PID" 2>/dev/null && wait "$NGINX_PID" 2>/dev/null
    rm -rf -- "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/www" "$WORK/tmp" "$WORK/out"
head -c $((SIZE_MIB * 1024 * 1024)) /dev/urandom >"$WORK/www/file.bin"
SHA=$(sha256sum <"$WORK/www/file.bin" | awk '{print $1}')
BYTES=$(stat -c %s "$WORK/www/file.bin")
PORT=$((20000 + RANDOM % 30000))
cat >"$WORK/nginx.conf" <<CONF
$([[ $(id -u) -eq 0 ]] && echo "user root;")
worker_processes 1;
error_log $WORK/error.log;
pid $WORK/nginx.pid;
events { worker_connections 256; }
http {
    client_body_temp_path $WORK/tmp/cb; proxy_temp_path $WORK/tmp/p; fastcgi_temp_path $WORK/tmp/f;
    uwsgi_temp_path $WORK/tmp/u; scgi_temp_path $WORK/tmp/s;
    log_format sent '\$body_bytes_sent';
    access_log $WORK/access.log sent;
    sendfile on;
    sendfile_max_chunk 64k;
    server {
        listen 127.0.0.1:$PORT;
        root $WORK/www;
        limit_rate 2m;
    }
}
CONF
nginx -p "$WORK/" -c "$WORK/nginx.conf" -g 'daemon off;' </dev/null >/dev/null 2>&1 &
NGINX_PID=$!
for _ in $(seq 50); do curl -sf -o /dev/null -r 0-0 "http://127.0.0.1:$PORT/file.bin" && break; sleep 0.1; done
URL="http://127.0.0.1:$PORT/file.bin"

sent() { awk '{s += $1} END {print s + 0}' "$WORK/access.log"; }

# run_case NAME COMMAND...: kill -9 once the client has received half the file, run it again
# to the end, and report what nginx sent beyond one copy of the file.
run_case() {
    local name=$1
    shift
    : >"$WORK/access.log"
    kill -USR1 "$NGINX_PID" # reopen the log
    sleep 0.2
    "$@" >/dev/null 2>&1 &
    local pid=$! received=0
    # What the client's sockets have received so far, whatever system call it reads with: the kernel's
    # per-socket counters, summed over the client ends of connections to our port.
    while kill -0 "$pid" 2>/dev/null; do
        received=$({ ss -tinH "dport = :$PORT" 2>/dev/null || true; } | { grep -o 'bytes_received:[0-9]*' || true; } |
            cut -d: -f2 | awk '{s += $1} END {print s + 0}')
        ((received >= BYTES / 2)) && break
        sleep 0.02
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    sleep 1 # let nginx log the aborted requests
    local first
    first=$(sent)
    local rc=0
    timeout 300 "$@" >/dev/null 2>&1 || rc=$?
    sleep 0.5
    local total
    total=$(sent)
    local out=$WORK/out/$name.bin verdict
    if [[ $rc -ne 0 ]]; then
        verdict="rerun failed (exit $rc)"
    elif [[ $(sha256sum <"$out" | awk '{print $1}') == "$SHA" ]]; then
        verdict="sha256 ok"
    else
        verdict="SHA-256 MISMATCH: corrupt file"
    fi
    printf '%-14s first run sent %6.1f MiB; both runs %6.1f MiB; re-fetched %6.1f MiB; %s\n' "$name" \
        "$(awk -v b="$first" 'BEGIN {print b / 1048576}')" "$(awk -v b="$total" 'BEGIN {print b / 1048576}')" \
        "$(awk -v b="$total" -v s="$BYTES" 'BEGIN {print (b - s) / 1048576}')" "$verdict"
    rm -f "$out" "$out".*
}

echo "resume-compare: ${SIZE_MIB} MiB, 8 connections at 2 MiB/s each, SIGKILL at 50 %, then the same command again"
run_case downpour-x8 "$BIN" get "$URL" -o "$WORK/out/downpour-x8.bin" -x 8 --quiet
run_case aria2c-x8 aria2c -x 8 -s 8 -k 1M -c -d "$WORK/out" -o aria2c-x8.bin --allow-overwrite=false \
    --console-log-level=error --summary-interval=0 "$URL"
