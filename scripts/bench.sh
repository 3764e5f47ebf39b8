#!/usr/bin/env bash
# Benchmark: the downpour CLI against aria2c, curl and wget2, downloading from
# a real nginx (Debian's package) that this script starts on 127.0.0.1 (and,
# for the `lossy` case, inside two network namespaces it creates).
#
# Usage: scripts/bench.sh [--binary PATH] [--reps N] [--cases LIST]
#                         [--size-scale F] [--csv FILE] [--run-timeout S]
#                         [--lossy-cc ALGO] [--settle S] [--floor PATH]
#
# Cases (default: all but `mirrors`, `rss`, `daemon` and `stalled`, which run only when listed):
#   unthrottled  1 GiB, no limits
#   checksum     the unthrottled case's 1 GiB file: downpour -x 4 without and with
#                --checksum=sha-256=HEX and --checksum=sha-512=HEX, aria2c -x 4 -s 4
#                without and with --checksum=sha-256=HEX: time with / without per
#                tool (issue 10's target for downpour sha-256: <= 1.15); downpour
#                also over 4 x 20 MiB/s and 4 x 100 MiB/s links (nginx limit_rate)
#   throttled    100 MiB, every connection limited to 20 MiB/s
#   straggler    200 MiB, one connection in four limited to 1 MiB/s, plus an
#                unthrottled 200 MiB "ideal" reference for downpour/aria2c -x 4
#   lossy        100 MiB over a link with 50 ms delay and 0.5 % loss each way
#                (netem, else a userspace delay line: scripts/bench/delayline.py)
#   manyfiles    1,000 files of 64 KiB, 16 at a time: downpour get -i, aria2c -i,
#                curl --parallel; time, and connections opened (nginx's log).
#                With --floor PATH (Benchmarks/TransportFloor, built with swift
#                build -c release), also AsyncHTTPClient alone writing the files
#                as curl does (plain) and as downpour does (durable: synced
#                before the name appears)
#   ratelimit    4 x 50 MiB under --max-overall-download-limit 20M, and 100 MiB
#                under --max-download-limit 10M (downpour, aria2c): rate / limit
#   rss          downpour -x 4 on 1 GiB and 4 GiB: peak RSS of each
#   mirrors      1 GiB from two nginx ports (mirrors), every connection limited
#                to 25 MiB/s, two connections per mirror: downpour and aria2c
#                with one mirror vs both; and a second mirror at a quarter of the
#                rate (how the work spreads)
#   daemon       downpour daemon vs aria2c --enable-rpc (scripts/bench/rpc_bench.py):
#                10,000 addUri in multicall batches of 100, tellWaiting/tellStatus
#                latency with 10,000 waiting, peak RSS, 1,000 x 64 KiB over RPC
#   stalled      downpour daemon vs aria2c --enable-rpc, no secret (scripts/bench/stall_bench.py):
#                2,000 connections that send half a request: memory per connection
#                held, a call's latency meanwhile, time until all are closed
#
# Before every run the script syncs and waits --settle seconds (default 1), so
# that the kernel's writeback of the previous run's file does not land in the
# next run. Every client runs once per repetition, in an order that rotates from one
# repetition to the next; the tables show medians. Raw runs go to the CSV
# (default ./bench-results.csv), progress to stderr, the summary to stdout.
# See Benchmarks/README.md.
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd -- "$SCRIPT_DIR/.." && pwd)
HELPERS="$SCRIPT_DIR/bench"

die() { echo "bench: $*" >&2; exit 2; }
note() { echo "bench: $*" >&2; }
# shellcheck source=scripts/lib/nginx.sh
source "$SCRIPT_DIR/lib/nginx.sh"

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
}

# ------------------------------------------------------------------ options
BIN=""
REPS=3
CASES="unthrottled,checksum,throttled,straggler,lossy,manyfiles,ratelimit"
SCALE=1
CSV="bench-results.csv"
RUN_TIMEOUT=""
LOSSY_CC=""
FLOOR=""
SETTLE=1
ALL_CASES=(unthrottled checksum throttled straggler lossy manyfiles ratelimit mirrors rss daemon stalled)

while [[ $# -gt 0 ]]; do
    arg=$1
    val=""
    case $arg in
        --*=*) val=${arg#*=}; arg=${arg%%=*} ;;
        -h | --help) usage; exit 0 ;;
        --binary | --reps | --cases | --size-scale | --csv | --run-timeout | --lossy-cc | --settle | --floor)
            [[ $# -ge 2 ]] || die "$arg needs a value"
            val=$2
            shift
            ;;
        *) die "unknown argument: $arg (see --help)" ;;
    esac
    shift
    case $arg in
        --binary) BIN=$val ;;
        --reps) REPS=$val ;;
        --cases) CASES=$val ;;
        --size-scale) SCALE=$val ;;
        --csv) CSV=$val ;;
        --run-timeout) RUN_TIMEOUT=$val ;;
        --lossy-cc) LOSSY_CC=$val ;;
        --settle) SETTLE=$val ;;
        --floor) FLOOR=$val ;;
        *) die "unknown argument: $arg (see --help)" ;;
    esac
done

[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "--reps must be a positive integer: $REPS"
if ! [[ $SCALE =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] || ! awk -v s="$SCALE" 'BEGIN { exit !(s > 0) }'; then
    die "--size-scale must be a positive number: $SCALE"
fi
[[ -z $RUN_TIMEOUT || $RUN_TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "--run-timeout must be whole seconds: $RUN_TIMEOUT"
[[ -z $LOSSY_CC || $LOSSY_CC =~ ^[a-z0-9_]+$ ]] || die "--lossy-cc: bad algorithm name: $LOSSY_CC"
[[ $SETTLE =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] || die "--settle must be a number of seconds: $SETTLE"

SELECTED=()
IFS=',' read -r -a _cases <<<"$CASES"
for c in "${_cases[@]}"; do
    [[ -n $c ]] || continue
    known=0
    for k in "${ALL_CASES[@]}"; do [[ $c == "$k" ]] && known=1; done
    [[ $known -eq 1 ]] || die "unknown case: $c (known: ${ALL_CASES[*]})"
    SELECTED+=("$c")
done
[[ ${#SELECTED[@]} -gt 0 ]] || die "--cases is empty"
case_selected() {
    local c
    for c in "${SELECTED[@]}"; do [[ $c == "$1" ]] && return 0; done
    return 1
}
# The cases started so far (the main loop adds each one as it starts it).
STARTED=()
# pending CASE: CASE is selected and has not started yet (so a case can leave it a file it shares).
pending() {
    local c
    case_selected "$1" || return 1
    for c in "${STARTED[@]}"; do [[ $c == "$1" ]] && return 1; done
    return 0
}

# ------------------------------------------------------------- dependencies
# command -> Debian package
declare -A PKG_OF=(
    [nginx]=nginx [aria2c]=aria2 [curl]=curl [wget2]=wget2
    [/usr/bin/time]=time [ip]=iproute2 [tc]=iproute2 [python3]=python3
    [sha256sum]=coreutils [sha512sum]=coreutils [timeout]=coreutils [awk]=mawk
)
have() {
    case $1 in
        /*) [[ -x $1 ]] ;;
        nginx) command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] ;;
        *) command -v "$1" >/dev/null ;;
    esac
}
missing=()
for cmd in "${!PKG_OF[@]}"; do
    if ! have "$cmd"; then
        p=${PKG_OF[$cmd]}
        [[ " ${missing[*]} " == *" $p "* ]] || missing+=("$p")
    fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
    SUDO=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null || die "need root to install: ${missing[*]}"
        SUDO=(sudo -n)
    fi
    note "installing Debian packages: ${missing[*]}"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null >&2 ||
        die "apt-get update failed"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >&2 ||
        die "apt-get install ${missing[*]} failed"
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $NGINX ]] || die "nginx not found"

# ------------------------------------------------------------------- binary
if [[ -z $BIN ]]; then
    command -v swift >/dev/null || die "swift not found; build elsewhere and pass --binary PATH"
    note "building: swift build -c release --product downpour (in $REPO)"
    (cd -- "$REPO" && swift build -c release --product downpour </dev/null >&2) ||
        die "release build failed"
    BIN="$REPO/.build/release/downpour"
fi
[[ -f $BIN && -x $BIN ]] || die "binary not found or not executable: $BIN"
case $BIN in /*) ;; *) BIN="$PWD/$BIN" ;; esac
if [[ -n $FLOOR ]]; then
    [[ -f $FLOOR && -x $FLOOR ]] || die "--floor: not found or not executable: $FLOOR (build it: swift build -c release --package-path Benchmarks/TransportFloor)"
    case $FLOOR in /*) ;; *) FLOOR="$PWD/$FLOOR" ;; esac
fi

# --------------------------------------------------------------- work space
WORK=$(mktemp -d "${TMPDIR:-/tmp}/downpour-bench.XXXXXX")
chmod 755 "$WORK"
WWW="$WORK/www"
OUT="$WORK/out"
mkdir -p "$WWW" "$OUT" "$WORK/tmp" "$WORK/lossy/tmp"
NGINX_PID=""
LOSSY_NGINX_PID=""
DELAY_PID=""
NS_SRV=""
NS_CLI=""

lossy_teardown() {
    stop_pid "$LOSSY_NGINX_PID" "nginx (lossy)"
    LOSSY_NGINX_PID=""
    if [[ -n $DELAY_PID ]]; then
        stop_pid "$DELAY_PID" "delay line"
        DELAY_PID=""
        [[ -s $WORK/lossy/delayline.err ]] && sed 's/^/bench: /' "$WORK/lossy/delayline.err" >&2
    fi
    if [[ -n $NS_SRV ]]; then ip netns del "$NS_SRV" 2>/dev/null || true; fi
    if [[ -n $NS_CLI ]]; then ip netns del "$NS_CLI" 2>/dev/null || true; fi
    NS_SRV=""
    NS_CLI=""
}

cleanup() {
    local rc=$?
    trap - EXIT
    lossy_teardown
    stop_pid "$NGINX_PID" nginx
    NGINX_PID=""
    rm -rf -- "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# -------------------------------------------------------------------- nginx
THROTTLE_RATE=20m
# A fast network's rate per connection (the checksum case's second link): 4 x 100 MiB/s, about 420 MB/s.
FAST_RATE=100m
STRAGGLER_RATE=1m

# nginx's counter of accepted connections (location /status), when this build
# has the stub_status module (Debian's has).
HAVE_STUB_STATUS=0
"$NGINX" -V 2>&1 | grep -q -- --with-http_stub_status_module && HAVE_STUB_STATUS=1
status_location() {
    [[ $HAVE_STUB_STATUS -eq 1 ]] || return 0
    printf '        location = /status {\n            stub_status;\n            access_log off;\n        }\n'
}

# The mirrors case: every connection limited to this; the slow mirror to a quarter of it.
MIRROR_RATE=25m
MIRROR_SLOW_RATE=6400k

# mirror_server LISTEN DIR: a second host (127.0.0.2, so that aria2's -x, which counts connections per host
# name, allows two to each mirror) serving the same files, for the mirrors case; it logs every request's
# client, path and bytes to DIR/mirrors.log.
mirror_server() {
    [[ -n $1 ]] || return 0
    cat <<EOF
    log_format mirrors '\$http_user_agent|\$uri|\$status|\$body_bytes_sent';
    server {
        listen $1;
        server_name localhost;
        root $WWW;
        access_log $2/mirrors.log mirrors;
        location /mirror/ {
            alias $WWW/;
            limit_rate $MIRROR_RATE;
            sendfile_max_chunk 64k;
        }
        location /mirror-slow/ {
            alias $WWW/;
            limit_rate $MIRROR_SLOW_RATE;
            sendfile_max_chunk 64k;
        }
    }
EOF
}

# write_conf FILE LISTEN PREFIXDIR [MIRROR_LISTEN]
write_conf() {
    local file=$1 listen=$2 dir=$3 mirror_listen=${4:-}
    cat >"$file" <<EOF
$(nginx_user_line)
worker_processes auto;
error_log $dir/error.log;
pid $dir/nginx.pid;
events {
    worker_connections 1024;
}
http {
$(nginx_http_common "$dir")
    log_format bench '\$connection \$connection_requests "\$request" \$status \$body_bytes_sent \$request_time';
    access_log $dir/access.log bench;
    # The manyfiles and ratelimit cases read this one (cut per run at the byte
    # offset before the run): connection serial number, request end time and
    # duration, to count the connections a client used and the server-side span.
    log_format conns '\$connection \$connection_requests \$msec \$request_time \$status \$body_bytes_sent "\$request"';
    keepalive_requests 100000;
    keepalive_timeout 65;

    # One connection in four (serial number divisible by 4) is a straggler;
    # 0 = no limit.
    map \$connection \$straggler_rate {
        default 0;
        "~^[048]\$" $STRAGGLER_RATE;
        "~([02468][048]|[13579][26])\$" $STRAGGLER_RATE;
    }

    server {
        listen $listen;
        server_name localhost;
        root $WWW;

        # The serial number of this connection (to line up the straggler case).
        location = /conn {
            default_type text/plain;
            return 200 "\$connection\n";
        }
        # Without a small sendfile_max_chunk nginx sends large pieces of a
        # response past limit_rate, and many small range requests would cheat.
        location /throttled/ {
            alias $WWW/;
            limit_rate $THROTTLE_RATE;
            sendfile_max_chunk 64k;
        }
        location /fast/ {
            alias $WWW/;
            limit_rate $FAST_RATE;
            sendfile_max_chunk 256k;
        }
        location /straggler/ {
            alias $WWW/;
            limit_rate \$straggler_rate;
            sendfile_max_chunk 64k;
        }
        # The straggler case's ideal: the same small sendfile pieces, no limit.
        location /chunked/ {
            alias $WWW/;
            sendfile_max_chunk 64k;
        }
        # manyfiles (1,000 small files) and ratelimit: no limits, logged to
        # conn.log only.
        location /many/ {
            alias $WWW/many/;
            access_log $dir/conn.log conns;
        }
        location /rl/ {
            alias $WWW/;
            access_log $dir/conn.log conns;
        }
        # The first mirror of the mirrors case (the second is on the next port).
        location /mirror/ {
            alias $WWW/;
            limit_rate $MIRROR_RATE;
            sendfile_max_chunk 64k;
        }
        # Accepted connections so far (nginx's counter, including connections
        # that never carried a request).
$(status_location)
    }
$(mirror_server "$mirror_listen" "$dir")
}
EOF
}

# start_nginx PORT: returns 0 once nginx answers on 127.0.0.1:PORT.
start_nginx() {
    write_conf "$WORK/nginx.conf" "127.0.0.1:$1" "$WORK" "127.0.0.2:$(($1 + 1))"
    launch_nginx "$WORK" "$WORK/nginx.conf" "http://127.0.0.1:$1/conn"
}

start_on_free_port start_nginx 2 "$WORK"
BASE="http://127.0.0.1:$PORT"
MIRROR_BASE="http://127.0.0.2:$((PORT + 1))"

# ------------------------------------------------------------------ helpers
MIB=1048576
# scaled BYTES: BYTES * --size-scale, whole bytes, at least 1 MiB.
scaled() {
    awk -v b="$1" -v s="$SCALE" -v m="$MIB" 'BEGIN { v = int(b * s); if (v < m) v = m; printf "%.0f", v }'
}
human() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

declare -A FILE_SHA
# gen_file SIZE: makes $WWW/data-SIZE.bin from /dev/urandom (once); sets DATA_NAME.
gen_file() {
    local size=$1 name="data-$1.bin"
    if [[ -z ${FILE_SHA[$name]:-} ]]; then
        note "generating $name ($(human "$size")) from /dev/urandom"
        head -c "$size" /dev/urandom >"$WWW/$name"
        [[ $(stat -c %s "$WWW/$name") -eq $size ]] || die "could not write $WWW/$name (disk full?)"
        FILE_SHA[$name]=$(sha256sum <"$WWW/$name" | awk '{print $1}')
    fi
    DATA_NAME=$name
}
drop_file() {
    rm -f -- "$WWW/$1"
    unset "FILE_SHA[$1]"
}

CSV_HEADER="case,rep,seq,client_index,client,tool,connections,role,size_bytes,url,exit_code,status,wall_s,mb_s,user_s,sys_s,cpu_s,max_rss_kb,sha_ok,limit_bps,log_conns,log_requests,server_s,accepted_conns,files_ok"
case $CSV in /*) ;; *) CSV="$PWD/$CSV" ;; esac
echo "$CSV_HEADER" >"$CSV" || die "cannot write $CSV"

# The ceiling of the throttled case: N curl processes, each fetching its Nth of
# the file with one range request and writing it at its offset (no probe, no
# splitting, no sync): what nginx itself delivers at N x its per-connection limit.
# shellcheck disable=SC2016 # expanded by the inner bash
CURL_RANGES='set -o pipefail
url=$1 out=$2 n=$3 size=$4
: >"$out"
per=$(((size + n - 1) / n))
pids=()
for ((i = 0; i < n; i++)); do
    a=$((i * per))
    ((a < size)) || break
    b=$((a + per - 1))
    ((b < size)) || b=$((size - 1))
    (curl -sS -f -r "$a-$b" "$url" | dd of="$out" bs=1M seek="$a" oflag=seek_bytes conv=notrunc status=none) &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit "$rc"'

# Options every aria2c row shares (no config file, no preallocation, no
# renaming, quiet console).
ARIA2_COMMON=(--no-conf --file-allocation=none --allow-overwrite=true --auto-file-renaming=false
    --console-log-level=warn --summary-interval=0)

# client_cmd TOOL N URL OUT SIZE [EXTRA]: sets CMD. OUT is the output file, or
# for the *-list tools the output directory; URL is then the input list (for
# curl-list a curl config file with url/output pairs). EXTRA: more options,
# separated by spaces (appended before the URL).
client_cmd() {
    local tool=$1 n=$2 url=$3 out=$4 size=$5
    local -a extra=() urls=()
    [[ -n ${6:-} ]] && read -r -a extra <<<"$6"
    case $tool in
        downpour-mirrors)
            # URL: the mirrors, separated by spaces; N connections in all.
            read -r -a urls <<<"$url"
            CMD=("$BIN" get "${urls[@]}" -o "$out" -x "$n" --quiet --overwrite "${extra[@]}")
            ;;
        aria2c-mirrors)
            # aria2's -x is per server: N / mirrors each, -s N in all.
            read -r -a urls <<<"$url"
            CMD=(aria2c "${ARIA2_COMMON[@]}" -x "$((n / ${#urls[@]}))" -s "$n" -k 1M
                -d "$(dirname -- "$out")" -o "$(basename -- "$out")" "${extra[@]}" "${urls[@]}")
            ;;
        downpour)
            CMD=("$BIN" get "$url" -o "$out" -x "$n" --quiet --overwrite "${extra[@]}")
            ;;
        downpour-list)
            CMD=("$BIN" get -i "$url" -j "$n" -d "$out" "${extra[@]}" --quiet)
            ;;
        aria2c)
            CMD=(aria2c "${ARIA2_COMMON[@]}" -x "$n" -s "$n" -k 1M
                -d "$(dirname -- "$out")" -o "$(basename -- "$out")" "${extra[@]}" "$url")
            ;;
        aria2c-list)
            CMD=(aria2c "${ARIA2_COMMON[@]}" -i "$url" -j "$n" -d "$out" "${extra[@]}")
            ;;
        curl)
            CMD=(curl -sS -f -o "$out" "$url")
            ;;
        curl-list)
            CMD=(curl --parallel --parallel-max "$n" -sS -f "${extra[@]}" --config "$url")
            ;;
        floor-plain | floor-durable)
            CMD=("$FLOOR" "$url" "$out" "${tool#floor-}" "$n")
            ;;
        curlranges)
            CMD=(bash -c "$CURL_RANGES" curl-ranges "$url" "$out" "$n" "$size")
            ;;
        wget2)
            # One connection (--max-threads=1; the default is 5), HTTP/1.1,
            # no Accept-Encoding, no config file, no xattrs.
            CMD=(wget2 -q --no-config --max-threads=1 --no-http2 --no-compression
                --no-xattr -O "$out" "$url")
            ;;
        *) die "unknown tool $tool" ;;
    esac
}

# align_connections URLBASE [NS]: makes throwaway connections until the next
# one nginx accepts gets a serial number = 1 (mod 4), so that in the straggler
# case every client's 4th, 8th, ... connection is the slow one, whatever ran
# before it (single-connection clients are never throttled).
align_connections() {
    local base=$1 s i
    for ((i = 0; i < 8; i++)); do
        s=$(curl -sf --max-time 5 "$base/conn") || return 1
        [[ $s =~ ^[0-9]+$ ]] || return 1
        ((s % 4 == 0)) && return 0
    done
    return 1
}

# Set to 1 by the cases that count connections (manyfiles, ratelimit): around
# each run, read nginx's accepted-connections counter and cut $WORK/conn.log.
# Off elsewhere: the extra /status request would shift the connection serial
# numbers that the straggler case lines up.
CONN_STATS=0

# accepted_count: nginx's count of accepted connections (stub_status), or "".
accepted_count() {
    [[ $HAVE_STUB_STATUS -eq 1 ]] || return 0
    curl -sf --max-time 5 "$BASE/status" 2>/dev/null | awk 'NR == 3 && $1 ~ /^[0-9]+$/ { print $1 }' || true
}

# conn_log_stats OFFSET: from $WORK/conn.log after byte OFFSET, prints
# "CONNECTIONS REQUESTS SPAN" (distinct $connection serials, requests, first
# request start to last request end in seconds), or nothing when no request
# was logged.
conn_log_stats() {
    [[ -f $WORK/conn.log ]] || return 0
    tail -c +"$(($1 + 1))" "$WORK/conn.log" | awk '
        $3 ~ /^[0-9.]+$/ && $4 ~ /^[0-9.]+$/ {
            n++; c[$1] = 1
            s = $3 - $4; e = $3 + 0
            if (n == 1 || s < lo) lo = s
            if (n == 1 || e > hi) hi = e
        }
        END { if (n > 0) { k = 0; for (x in c) k++; printf "%d %d %.3f\n", k, n, hi - lo } }'
}

# run_one CASE REP SEQ CLIENT_INDEX LABEL TOOL N URL SIZE SHA ROLE TIMEOUT [NS] [EXTRA] [LIMIT]
# SHA is the output file's SHA-256, or "manifest:FILE:COUNT" for the *-list
# tools: $OUT must then hold exactly COUNT files, each matching FILE (the
# output of sha256sum, names relative to $OUT). EXTRA: more client options
# (see client_cmd); LIMIT: the rate limit under test in bytes/s (CSV only).
run_one() {
    local cname=$1 rep=$2 seq=$3 cidx=$4 label=$5 tool=$6 n=$7 url=$8 size=$9
    local sha=${10} role=${11} tmo=${12} ns=${13:-} xopts=${14:-} limit=${15:-}
    local out="$OUT/download.bin" log="$WORK/client.log" timef="$WORK/time.out"
    local -a pre=()
    local rc=0 t0 t1 wall mbs e u s m cpu status shaok got
    local manifest="" want=0 nfiles="" filesok="" logoff acc0="" acc1 accepted="" lconns="" lreqs="" lspan=""
    if [[ $sha == manifest:* ]]; then
        manifest=${sha#manifest:}
        want=${manifest##*:}
        manifest=${manifest%:*}
        out=$OUT
    fi
    rm -rf -- "$OUT"
    mkdir -p "$OUT"
    : >"$timef"
    sync
    sleep "$SETTLE"
    [[ -n $ns ]] && pre=(ip netns exec "$ns")
    client_cmd "$tool" "$n" "$url" "$out" "$size" "$xopts"
    if [[ $CONN_STATS -eq 1 ]]; then
        acc0=$(accepted_count)
        logoff=$(stat -c %s "$WORK/conn.log" 2>/dev/null || echo 0)
    fi
    t0=$EPOCHREALTIME
    "${pre[@]}" timeout -k 5 "$tmo" /usr/bin/time -f '%e %U %S %M' -o "$timef" \
        "${CMD[@]}" </dev/null >"$log" 2>&1 || rc=$?
    t1=$EPOCHREALTIME
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    read -r e u s m < <(tail -n 1 "$timef" 2>/dev/null || true) || true
    [[ ${e:-} =~ ^[0-9.]+$ && ${u:-} =~ ^[0-9.]+$ && ${s:-} =~ ^[0-9.]+$ && ${m:-} =~ ^[0-9]+$ ]] ||
        { u=""; s=""; m=""; }
    cpu=""
    [[ -n $u ]] && cpu=$(awk -v a="$u" -v b="$s" 'BEGIN { printf "%.2f", a + b }')
    if [[ $CONN_STATS -eq 1 ]]; then
        # The one this reading opens itself is counted too.
        acc1=$(accepted_count)
        [[ -n $acc0 && -n $acc1 ]] && accepted=$((acc1 - acc0 - 1))
    fi
    shaok=0
    if [[ -n $manifest ]]; then
        nfiles=$(find "$OUT" -type f | wc -l)
        filesok=$(cd -- "$OUT" && { sha256sum -c "$manifest" 2>/dev/null | grep -c ': OK$'; }) || true
    fi
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        status=TIMEOUT
    elif [[ $rc -ne 0 ]]; then
        status="EXIT$rc"
    elif [[ -n $manifest ]]; then
        if [[ $filesok -eq $want && $nfiles -eq $want ]]; then
            shaok=1
            status=ok
        elif [[ $nfiles -eq 0 ]]; then
            status=NO-OUTPUT
        elif [[ $nfiles -ne $want ]]; then
            status="FILES-$nfiles-OF-$want"
        else
            status="SHA-MISMATCH-$((want - filesok))"
        fi
    elif [[ ! -f $out ]]; then
        status=NO-OUTPUT
    else
        got=$(sha256sum <"$out" | awk '{print $1}')
        if [[ $got == "$sha" ]]; then
            shaok=1
            status=ok
        else
            status=SHA-MISMATCH
        fi
    fi
    # nginx writes a request's log line right after its last byte; the
    # verification above has given it time.
    if [[ $CONN_STATS -eq 1 ]]; then
        read -r lconns lreqs lspan < <(conn_log_stats "$logoff") || true
    fi
    mbs=$(awk -v b="$size" -v w="$wall" 'BEGIN { if (w > 0) printf "%.1f", b / w / 1e6 }')
    printf '%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' \
        "$cname" "$rep" "$seq" "$cidx" "$label" "$tool" "$n" "$role" "$size" "$url" \
        "$rc" "$status" "$wall" "$mbs" "$u" "$s" "$cpu" "$m" "$shaok" \
        "$limit" "$lconns" "$lreqs" "$lspan" "$accepted" "$filesok" >>"$CSV"
    printf 'bench: [%s rep %d/%d #%d] %-22s %8s s %8s MB/s  cpu %5s s  rss %6s MB  %s%s\n' \
        "$cname" "$rep" "$REPS" "$seq" "$label" "$wall" "$mbs" "${cpu:--}" \
        "$(awk -v k="${m:-}" 'BEGIN { if (k != "") printf "%.1f", k * 1024 / 1e6; else printf "-" }')" \
        "$status" \
        "$( [[ -n $lconns || -n $accepted ]] && printf '  conns %s (accepted %s), %s requests, server %s s' \
            "${lconns:--}" "${accepted:--}" "${lreqs:--}" "${lspan:--}")" >&2
    if [[ $status != ok && -s $log ]]; then
        tail -n 5 "$log" | sed 's/^/bench:     | /' >&2
    fi
    if [[ $cname == manyfiles && -d $OUT ]]; then
        # Kept until the script ends. On ext4 without a journal (this project's machines), creating a file
        # makes the kernel look past every inode freed in the last minute (six, while its inode table is not yet
        # written back): deleting the last run's 1,000 files would slow whichever client runs next, and more with
        # every rep.
        mv -- "$OUT" "$WORK/kept.$cname.$rep.$seq"
    else
        rm -rf -- "$OUT"
    fi
    mkdir -p "$OUT"
}

# The clients of every case: "LABEL|TOOL|N".
CLIENTS=(
    "downpour -x 1|downpour|1"
    "downpour -x 4|downpour|4"
    "downpour -x 8|downpour|8"
    "downpour -x 16|downpour|16"
    "aria2c -x 1|aria2c|1"
    "aria2c -x 4|aria2c|4"
    "aria2c -x 8|aria2c|8"
    "aria2c -x 16|aria2c|16"
    "curl|curl|1"
    "wget2|wget2|1"
)

# run_matrix CASE SIZE TIMEOUT NS ALIGN_BASE ENTRY...
# ENTRY is "LABEL|TOOL|N|URL|ROLE[|SIZE|SHA|LIMIT|EXTRA]"; SIZE and SHA default
# to the case's SIZE and to the SHA-256 of $DATA_NAME (see run_one for the
# rest). For each repetition every entry runs once, starting one further down
# the list each time.
run_matrix() {
    local cname=$1 size=$2 tmo=$3 ns=$4 align=$5
    shift 5
    local -a entries=("$@")
    local n=${#entries[@]} r i idx seq label tool conns url role esize esha elimit eextra
    for ((r = 0; r < REPS; r++)); do
        seq=0
        for ((i = 0; i < n; i++)); do
            idx=$(((i + r) % n))
            IFS='|' read -r label tool conns url role esize esha elimit eextra <<<"${entries[$idx]}"
            [[ -n $esize ]] || esize=$size
            [[ -n $esha ]] || esha=${FILE_SHA[$DATA_NAME]}
            seq=$((seq + 1))
            if [[ -n $align ]] && ! align_connections "$align"; then
                note "could not line up nginx connection numbers"
            fi
            run_one "$cname" "$((r + 1))" "$seq" "$idx" "$label" "$tool" "$conns" "$url" \
                "$esize" "$esha" "$role" "$tmo" "$ns" "$eextra" "$elimit"
        done
    done
}

summarize() { # summarize CASE TITLE [EXTRA ARGS...]
    PYTHONDONTWRITEBYTECODE=1 python3 "$HELPERS/summarize.py" --csv "$CSV" --case "$1" --title "$2" "${@:3}"
}

timeout_for() { # timeout_for SIZE BYTES_PER_SECOND_FLOOR
    if [[ -n $RUN_TIMEOUT ]]; then
        echo "$RUN_TIMEOUT"
    else
        awk -v b="$1" -v r="$2" 'BEGIN { printf "%.0f", int(60 + b / r) }'
    fi
}

# -------------------------------------------------------------------- cases
# plain_case NAME SIZE RATE PATH DESCRIPTION [keep]: every client once per repetition on one file under
# PATH; with "keep" the file stays for a later case.
plain_case() {
    local name=$1 size=$2 rate=$3 path=$4 description=$5 keep=${6:-} tmo c entries=()
    tmo=$(timeout_for "$size" "$rate")
    gen_file "$size"
    for c in "${CLIENTS[@]}"; do entries+=("$c|$BASE$path/$DATA_NAME|main"); done
    run_matrix "$name" "$size" "$tmo" "" "" "${entries[@]}"
    summarize "$name" "$name: $(human "$size") ($size bytes), $description; $REPS rep(s), medians"
    [[ $keep == keep ]] || drop_file "$DATA_NAME"
}

case_unthrottled() {
    local keep=""
    pending checksum && keep=keep # the same file, made and hashed once
    plain_case unthrottled "$(scaled $((1024 * MIB)))" 20000000 "" "nginx on 127.0.0.1, no limits" $keep
}

# checksum: what --checksum costs (issue 10: verify as the bytes arrive, so that 1 GiB with a checksum takes at
# most CHECKSUM_TARGET times as long as without). The unthrottled case's file (same size and name: when both
# cases run, it is made once, and its SHA-256 is the one gen_file took), from nginx on 127.0.0.1 with no limits.
# Roles in the CSV: "main" without a checksum, else the algorithm. The output's SHA-256 is checked after every
# run as in the other cases.
CHECKSUM_TARGET=1.15
case_checksum() {
    local size tmo url sha256 sha512 entries=()
    size=$(scaled $((1024 * MIB)))
    tmo=$(timeout_for "$size" 20000000)
    gen_file "$size"
    url="$BASE/$DATA_NAME"
    sha256=${FILE_SHA[$DATA_NAME]}
    note "computing the SHA-512 of $DATA_NAME"
    sha512=$(sha512sum <"$WWW/$DATA_NAME" | awk '{print $1}')
    [[ $sha512 =~ ^[0-9a-f]{128}$ ]] || die "sha512sum failed on $WWW/$DATA_NAME"
    # LABEL|TOOL|N|URL|ROLE|SIZE|SHA|LIMIT|EXTRA
    entries+=("downpour -x 4|downpour|4|$url|main")
    entries+=("downpour -x 4 sha-256|downpour|4|$url|sha-256||||--checksum=sha-256=$sha256")
    entries+=("downpour -x 4 sha-512|downpour|4|$url|sha-512||||--checksum=sha-512=$sha512")
    entries+=("aria2c -x 4|aria2c|4|$url|main")
    entries+=("aria2c -x 4 sha-256|aria2c|4|$url|sha-256||||--checksum=sha-256=$sha256")
    # The same over a link as fast as a good network (limit_rate $THROTTLE_RATE per connection, 4 connections),
    # where the hash has the time the bytes take to come.
    entries+=("downpour -x 4 @4x$THROTTLE_RATE|downpour|4|$BASE/throttled/$DATA_NAME|main@link")
    entries+=("downpour -x 4 sha-256 @4x$THROTTLE_RATE|downpour|4|$BASE/throttled/$DATA_NAME|sha-256@link||||--checksum=sha-256=$sha256")
    # And over a fast one (limit_rate $FAST_RATE per connection): the bytes come at a third of loopback's speed.
    entries+=("downpour -x 4 @4x$FAST_RATE|downpour|4|$BASE/fast/$DATA_NAME|main@fast")
    entries+=("downpour -x 4 sha-256 @4x$FAST_RATE|downpour|4|$BASE/fast/$DATA_NAME|sha-256@fast||||--checksum=sha-256=$sha256")
    tmo=$(timeout_for "$size" 5000000)
    run_matrix checksum "$size" "$tmo" "" "" "${entries[@]}"
    summarize checksum "checksum: $(human "$size") ($size bytes), nginx on 127.0.0.1, no limits (@4x$THROTTLE_RATE, @4x$FAST_RATE: limit_rate per connection); -x 4 (aria2c -x 4 -s 4) without and with --checksum=TYPE=HEX; $REPS rep(s), medians" \
        --target "$CHECKSUM_TARGET"
    pending unthrottled || drop_file "$DATA_NAME"
}

case_throttled() {
    local size tmo c n entries=()
    size=$(scaled $((100 * MIB)))
    tmo=$(timeout_for "$size" 5000000)
    gen_file "$size"
    for c in "${CLIENTS[@]}"; do entries+=("$c|$BASE/throttled/$DATA_NAME|main"); done
    for n in 4 8 16; do
        entries+=("curl x$n ranges (ceiling)|curlranges|$n|$BASE/throttled/$DATA_NAME|ref")
    done
    run_matrix throttled "$size" "$tmo" "" "" "${entries[@]}"
    summarize throttled "throttled: $(human "$size") ($size bytes), limit_rate $THROTTLE_RATE per connection (sendfile_max_chunk 64k); $REPS rep(s), medians" \
        --per-connection-rate $((20 * MIB))
    drop_file "$DATA_NAME"
}

case_straggler() {
    local size tmo c entries=()
    size=$(scaled $((200 * MIB)))
    tmo=$(timeout_for "$size" 1048576)
    gen_file "$size"
    for c in "${CLIENTS[@]}"; do entries+=("$c|$BASE/straggler/$DATA_NAME|main"); done
    # The ideal: the same clients on the same file, served the same way (64k sendfile pieces), with every
    # connection fast.
    entries+=("downpour -x 4 (ideal)|downpour|4|$BASE/chunked/$DATA_NAME|ref")
    entries+=("aria2c -x 4 (ideal)|aria2c|4|$BASE/chunked/$DATA_NAME|ref")
    run_matrix straggler "$size" "$tmo" "" "$BASE" "${entries[@]}"
    summarize straggler "straggler: $(human "$size") ($size bytes), connections no. 4, 8, 12, ... of each client limited to $STRAGGLER_RATE/s (so single-connection clients never are); $REPS rep(s), medians"
    drop_file "$DATA_NAME"
}

LOSSY_DELAY_MS=50
LOSSY_LOSS_PCT=0.5
LOSSY_SRV_IP=10.203.0.1
LOSSY_CLI_IP=10.203.0.2
LOSSY_PORT=8080
LOSSY_LINK=""
LOSSY_SKIP=""

# lossy_setup: two namespaces joined by a link with delay and loss, nginx in
# one of them. Returns 1 with LOSSY_SKIP set when it cannot.
lossy_setup() {
    local i ok loss_frac ns
    [[ $(id -u) -eq 0 ]] || { LOSSY_SKIP="needs root (network namespaces)"; return 1; }
    NS_SRV="dpbench-srv-$$"
    NS_CLI="dpbench-cli-$$"
    if ! ip netns add "$NS_SRV" 2>"$WORK/lossy/ip.err" || ! ip netns add "$NS_CLI" 2>>"$WORK/lossy/ip.err"; then
        LOSSY_SKIP="ip netns add failed: $(head -n 1 "$WORK/lossy/ip.err")"
        return 1
    fi
    if ! ip -n "$NS_SRV" link set lo up || ! ip -n "$NS_CLI" link set lo up; then
        LOSSY_SKIP="cannot bring up lo in the namespaces"
        return 1
    fi
    for ns in "$NS_SRV" "$NS_CLI"; do
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 >/dev/null 2>&1 || true
        if [[ -n $LOSSY_CC ]]; then
            ip netns exec "$ns" sysctl -qw "net.ipv4.tcp_congestion_control=$LOSSY_CC" >/dev/null 2>&1 ||
                { LOSSY_SKIP="cannot set congestion control $LOSSY_CC"; return 1; }
        fi
    done

    # 1. The kernel's netem on both ends of a veth pair, when it has it.
    if ip -n "$NS_SRV" link add dpb0 type veth peer name dpb1 netns "$NS_CLI" 2>/dev/null &&
        ip netns exec "$NS_SRV" tc qdisc add dev dpb0 root netem \
            delay "${LOSSY_DELAY_MS}ms" loss "${LOSSY_LOSS_PCT}%" limit 100000 2>"$WORK/lossy/tc.err" &&
        ip netns exec "$NS_CLI" tc qdisc add dev dpb1 root netem \
            delay "${LOSSY_DELAY_MS}ms" loss "${LOSSY_LOSS_PCT}%" limit 100000 2>>"$WORK/lossy/tc.err"; then
        LOSSY_LINK="veth pair with netem on both ends"
    else
        note "no netem qdisc ($(head -n 1 "$WORK/lossy/tc.err" 2>/dev/null || echo 'veth failed')); using the userspace delay line"
        ip -n "$NS_SRV" link del dpb0 2>/dev/null || true
        # 2. Userspace: two TAP devices bridged by scripts/bench/delayline.py.
        loss_frac=$(awk -v p="$LOSSY_LOSS_PCT" 'BEGIN { printf "%.6f", p / 100 }')
        ip netns exec "$NS_SRV" python3 "$HELPERS/delayline.py" --a dpb0 --b dpb1 \
            --delay-ms "$LOSSY_DELAY_MS" --loss "$loss_frac" --max-seconds 21600 \
            </dev/null >"$WORK/lossy/delayline.out" 2>"$WORK/lossy/delayline.err" &
        DELAY_PID=$!
        ok=0
        for ((i = 0; i < 50; i++)); do
            if grep -q ready "$WORK/lossy/delayline.out" 2>/dev/null; then ok=1; break; fi
            kill -0 "$DELAY_PID" 2>/dev/null || break
            sleep 0.1
        done
        if [[ $ok -ne 1 ]]; then
            LOSSY_SKIP="delay line did not start: $(tail -n 1 "$WORK/lossy/delayline.err" 2>/dev/null)"
            return 1
        fi
        ip -n "$NS_SRV" link set dpb1 netns "$NS_CLI" ||
            { LOSSY_SKIP="cannot move the TAP device into $NS_CLI"; return 1; }
        ip -n "$NS_SRV" link set dpb0 txqueuelen 10000 2>/dev/null || true
        ip -n "$NS_CLI" link set dpb1 txqueuelen 10000 2>/dev/null || true
        LOSSY_LINK="userspace delay line (python3, 2 TAP devices)"
    fi
    if ! ip -n "$NS_SRV" addr add "$LOSSY_SRV_IP/30" dev dpb0 ||
        ! ip -n "$NS_CLI" addr add "$LOSSY_CLI_IP/30" dev dpb1 ||
        ! ip -n "$NS_SRV" link set dpb0 up ||
        ! ip -n "$NS_CLI" link set dpb1 up; then
        LOSSY_SKIP="cannot configure the link addresses"
        return 1
    fi

    write_conf "$WORK/lossy/nginx.conf" "$LOSSY_SRV_IP:$LOSSY_PORT" "$WORK/lossy"
    ip netns exec "$NS_SRV" "$NGINX" -p "$WORK/lossy/" -c "$WORK/lossy/nginx.conf" \
        -e "$WORK/lossy/error.log" -g 'daemon off;' </dev/null >>"$WORK/lossy/nginx.out" 2>&1 &
    LOSSY_NGINX_PID=$!
    ok=0
    for ((i = 0; i < 30; i++)); do
        kill -0 "$LOSSY_NGINX_PID" 2>/dev/null || break
        if ip netns exec "$NS_CLI" curl -sf -o /dev/null --max-time 3 \
            "http://$LOSSY_SRV_IP:$LOSSY_PORT/conn" 2>/dev/null; then
            ok=1
            break
        fi
        sleep 0.2
    done
    if [[ $ok -ne 1 ]]; then
        LOSSY_SKIP="nginx in $NS_SRV not reachable from $NS_CLI over the link: $(tail -n 1 "$WORK/lossy/error.log" 2>/dev/null)"
        return 1
    fi
    return 0
}

case_lossy() {
    local size tmo c entries=() base rtt cc
    LOSSY_SKIP=""
    if ! lossy_setup; then
        echo
        echo "lossy: skipped: $LOSSY_SKIP"
        lossy_teardown
        return 0
    fi
    base="http://$LOSSY_SRV_IP:$LOSSY_PORT"
    rtt=$(ip netns exec "$NS_CLI" curl -sf -o /dev/null -w '%{time_connect}' --max-time 5 "$base/conn" 2>/dev/null |
        awk '{ printf "%.0f ms", $1 * 1000 }')
    [[ -n $rtt ]] || rtt="?"
    cc=$(ip netns exec "$NS_CLI" cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo "?")
    note "lossy link: $LOSSY_LINK; TCP connect (1 RTT) $rtt; congestion control $cc"
    size=$(scaled $((100 * MIB)))
    tmo=${RUN_TIMEOUT:-120}
    gen_file "$size"
    for c in "${CLIENTS[@]}"; do entries+=("$c|$base/$DATA_NAME|main"); done
    run_matrix lossy "$size" "$tmo" "$NS_CLI" "" "${entries[@]}"
    summarize lossy "lossy: $(human "$size") ($size bytes), ${LOSSY_DELAY_MS} ms delay + ${LOSSY_LOSS_PCT} % loss each way (TCP connect $rtt), $LOSSY_LINK, TCP $cc, nginx and clients in two network namespaces; $REPS rep(s), medians"
    lossy_teardown
    drop_file "$DATA_NAME"
}

case_rss() {
    local small big tmo name_small sha_small
    small=$(scaled $((1024 * MIB)))
    big=$(scaled $((4096 * MIB)))
    tmo=$(timeout_for "$big" 20000000)
    gen_file "$small"
    name_small=$DATA_NAME
    sha_small=${FILE_SHA[$DATA_NAME]}
    gen_file "$big"
    local r
    for ((r = 1; r <= REPS; r++)); do
        run_one rss "$r" 1 0 "downpour -x 4 @ $(human "$small")" downpour 4 "$BASE/$name_small" \
            "$small" "$sha_small" main "$tmo" ""
        run_one rss "$r" 2 1 "downpour -x 4 @ $(human "$big")" downpour 4 "$BASE/$DATA_NAME" \
            "$big" "${FILE_SHA[$DATA_NAME]}" main "$tmo" ""
    done
    summarize rss "rss: downpour -x 4, $(human "$small") vs $(human "$big"), nginx on 127.0.0.1, no limits; $REPS rep(s)"
    drop_file "$name_small"
    drop_file "$DATA_NAME"
}

MANY_COUNT=1000
MANY_SIZE=65536
MANY_J=16

# gen_many: $WWW/many/f0000.bin ... f0999.bin (MANY_COUNT files of MANY_SIZE
# bytes, from /dev/urandom), their sha256sum manifest $WORK/many.sha256, the
# URL list $WORK/many.list (aria2-style, one URL a line) and the curl config
# $WORK/many.curl (url/output pairs, outputs under $OUT).
gen_many() {
    local dir="$WWW/many"
    # Made once and kept until the script ends, for manyfiles and daemon alike (see run_one on deletions).
    [[ -f $WORK/many.curl ]] && return 0
    mkdir -p "$dir"
    note "generating $MANY_COUNT files of $MANY_SIZE bytes from /dev/urandom"
    head -c $((MANY_COUNT * MANY_SIZE)) /dev/urandom |
        (cd -- "$dir" && split -b "$MANY_SIZE" -a 4 -d --additional-suffix=.bin - f)
    [[ $(find "$dir" -type f -size "${MANY_SIZE}c" | wc -l) -eq $MANY_COUNT ]] ||
        die "could not write $MANY_COUNT files to $dir (disk full?)"
    (cd -- "$dir" && sha256sum -- f*.bin) >"$WORK/many.sha256"
    awk -v base="$BASE/many/" '{ print base $2 }' "$WORK/many.sha256" >"$WORK/many.list"
    awk -v base="$BASE/many/" -v out="$OUT/" '{ printf "url = \"%s%s\"\noutput = \"%s%s\"\n", base, $2, out, $2 }' \
        "$WORK/many.sha256" >"$WORK/many.curl"
}

case_manyfiles() {
    local total tmo v entries=()
    gen_many
    total=$((MANY_COUNT * MANY_SIZE))
    tmo=${RUN_TIMEOUT:-180}
    v="manifest:$WORK/many.sha256:$MANY_COUNT"
    # LABEL|TOOL|N|URL (list)|ROLE|SIZE|SHA|LIMIT|EXTRA
    entries+=("downpour -j $MANY_J|downpour-list|$MANY_J|$WORK/many.list|main|$total|$v||-x 1")
    entries+=("aria2c -j $MANY_J|aria2c-list|$MANY_J|$WORK/many.list|main|$total|$v||-x 1 -s 1")
    entries+=("curl --parallel $MANY_J|curl-list|$MANY_J|$WORK/many.curl|main|$total|$v||")
    if [[ -n $FLOOR ]]; then
        entries+=("floor plain $MANY_J|floor-plain|$MANY_J|$WORK/many.list|main|$total|$v||")
        entries+=("floor durable $MANY_J|floor-durable|$MANY_J|$WORK/many.list|main|$total|$v||")
    fi
    CONN_STATS=1
    run_matrix manyfiles "$total" "$tmo" "" "" "${entries[@]}"
    CONN_STATS=0
    summarize manyfiles "manyfiles: $MANY_COUNT files of $MANY_SIZE bytes ($total bytes in all), $MANY_J at a time, nginx on 127.0.0.1, no limits; $REPS rep(s), medians" \
        --slots "$MANY_J"
}

# ratelimit: client-side limits against an unthrottled nginx (location /rl/).
RL_OVERALL=20M
RL_OVERALL_BPS=$((20 * MIB))
RL_PER=10M
RL_PER_BPS=$((10 * MIB))
RL_FILES=4
RL_OVERALL_X=1 # connections per download in the overall-limit rows

case_ratelimit() {
    local part big tmo i name list="$WORK/rl.list" man="$WORK/rl.sha256" entries=() bigsha
    part=$(scaled $((50 * MIB)))
    big=$(scaled $((100 * MIB)))
    # RL_FILES distinct files of `part` bytes for the overall limit.
    note "generating $RL_FILES files of $(human "$part") from /dev/urandom"
    : >"$list"
    : >"$man"
    for ((i = 1; i <= RL_FILES; i++)); do
        name="rl-$i.bin"
        head -c "$part" /dev/urandom >"$WWW/$name"
        [[ $(stat -c %s "$WWW/$name") -eq $part ]] || die "could not write $WWW/$name (disk full?)"
        (cd -- "$WWW" && sha256sum -- "$name") >>"$man"
        echo "$BASE/rl/$name" >>"$list"
    done
    gen_file "$big"
    bigsha=${FILE_SHA[$DATA_NAME]}
    # Each run should take about bytes / limit; allow 3 times that plus 60 s.
    if [[ -n $RUN_TIMEOUT ]]; then
        tmo=$RUN_TIMEOUT
    else
        tmo=$(awk -v a="$((RL_FILES * part))" -v ra="$RL_OVERALL_BPS" -v b="$big" -v rb="$RL_PER_BPS" \
            'BEGIN { t = a / ra; if (b / rb > t) t = b / rb; printf "%.0f", 60 + 3 * t }')
    fi
    # LABEL|TOOL|N|URL|ROLE|SIZE|SHA|LIMIT|EXTRA
    entries+=("downpour -j $RL_FILES overall $RL_OVERALL|downpour-list|$RL_FILES|$list|overall|$((RL_FILES * part))|manifest:$man:$RL_FILES|$RL_OVERALL_BPS|-x $RL_OVERALL_X --max-overall-download-limit $RL_OVERALL")
    entries+=("aria2c -j $RL_FILES overall $RL_OVERALL|aria2c-list|$RL_FILES|$list|overall|$((RL_FILES * part))|manifest:$man:$RL_FILES|$RL_OVERALL_BPS|-x $RL_OVERALL_X -s $RL_OVERALL_X --max-overall-download-limit=$RL_OVERALL")
    entries+=("downpour -x 4 per-dl $RL_PER|downpour|4|$BASE/rl/$DATA_NAME|per-download|$big|$bigsha|$RL_PER_BPS|--max-download-limit $RL_PER")
    entries+=("aria2c -x 4 per-dl $RL_PER|aria2c|4|$BASE/rl/$DATA_NAME|per-download|$big|$bigsha|$RL_PER_BPS|--max-download-limit=$RL_PER")
    CONN_STATS=1
    run_matrix ratelimit "$big" "$tmo" "" "" "${entries[@]}"
    CONN_STATS=0
    summarize ratelimit "ratelimit: $RL_FILES x $(human "$part") at once under --max-overall-download-limit $RL_OVERALL, and $(human "$big") ($big bytes) under --max-download-limit $RL_PER; nginx on 127.0.0.1, no limits; $REPS rep(s), medians"
    for ((i = 1; i <= RL_FILES; i++)); do rm -f -- "$WWW/rl-$i.bin"; done
    drop_file "$DATA_NAME"
}

# daemon: the two RPC daemons side by side (see scripts/bench/rpc_bench.py).
case_mirrors() {
    local size tmo a b slow entries=()
    size=$(scaled $((1024 * MIB)))
    tmo=$(timeout_for "$size" 5000000)
    gen_file "$size"
    a="$BASE/mirror/$DATA_NAME"
    b="$MIRROR_BASE/mirror/$DATA_NAME"
    slow="$MIRROR_BASE/mirror-slow/$DATA_NAME"
    # Two connections per mirror in every row: one mirror alone is the bottleneck.
    entries+=("downpour 1 mirror -x 2|downpour-mirrors|2|$a|main")
    entries+=("downpour 2 mirrors -x 4|downpour-mirrors|4|$a $b|main")
    entries+=("aria2c 1 mirror -x 2 -s 2|aria2c-mirrors|2|$a|main")
    entries+=("aria2c 2 mirrors -x 2 -s 4|aria2c-mirrors|4|$a $b|main")
    entries+=("downpour fast+slow -x 4|downpour-mirrors|4|$a $slow|main")
    entries+=("aria2c fast+slow -x 2 -s 4|aria2c-mirrors|4|$a $slow|main")
    : >"$WORK/mirrors.log"
    run_matrix mirrors "$size" "$tmo" "" "" "${entries[@]}"
    summarize mirrors "mirrors: $(human "$size") ($size bytes), limit_rate $MIRROR_RATE per connection (slow mirror $MIRROR_SLOW_RATE), 2 connections per mirror; $REPS rep(s), medians"
    # How much of the file the second mirror served (nginx's log of it, over all repetitions).
    awk -F'|' -v total="$((REPS * size))" '
        { client = ($1 ~ /^aria2/) ? "aria2c" : ($1 ~ /^downpour/) ? "downpour" : "other"
          where = ($2 ~ /^\/mirror-slow\//) ? "slow" : "same-speed"
          bytes[client " " where] += $4 }
        END { printf "second mirror'"'"'s share of the bytes (its log, body bytes / file size, all reps):"
              n = split("downpour same-speed,aria2c same-speed,downpour slow,aria2c slow", keys, ",")
              for (i = 1; i <= n; i++) printf "  %s %.3f", keys[i], bytes[keys[i]] / total
              printf "\n" }' "$WORK/mirrors.log"
    drop_file "$DATA_NAME"
}

case_daemon() {
    gen_many
    PYTHONDONTWRITEBYTECODE=1 python3 "$HELPERS/rpc_bench.py" --downpour "$BIN" --base "$BASE" \
        --many-dir "$WWW/many" --manifest "$WORK/many.sha256" --work "$WORK" --reps "$REPS" --settle "$SETTLE"
}

# 2,000 connections that send half a request and then nothing, against each daemon without a secret: resident
# memory per connection held, a normal call's latency meanwhile, time until all are closed (issue 25).
case_stalled() {
    PYTHONDONTWRITEBYTECODE=1 python3 "$HELPERS/stall_bench.py" --downpour "$BIN" --connections 2000 \
        --json "$WORK/stalled.json"
}

# --------------------------------------------------------------------- main
echo "downpour benchmark, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "binary:  $BIN ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$REPO" diff --quiet HEAD -- 2>/dev/null || echo ', work tree modified'))"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r), TCP $(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo '?')"
echo "         sha256 $(sha256sum <"$BIN" | cut -c1-16)..., $(stat -c %s "$BIN") bytes, built $(date -u -r "$BIN" '+%Y-%m-%d %H:%M UTC')"
echo "peers:   $(aria2c --version | head -n 1); $(curl --version | head -n 1 | cut -d' ' -f1-2); $(wget2 --version 2>/dev/null | head -n 1 | cut -d' ' -f1-3)"
echo "server:  $("$NGINX" -v 2>&1 | sed 's/^nginx version: //'), worker_processes auto, sendfile on, at $BASE"
echo "clients: downpour get URL -o F -x N --quiet --overwrite; aria2c -x N -s N -k 1M --file-allocation=none (no conf);"
echo "         curl -sS -f -o F; wget2 -q --max-threads=1 --no-http2 --no-compression --no-xattr --no-config -O F"
if case_selected manyfiles || case_selected ratelimit; then
    echo "lists:   downpour get -i LIST -j N -d DIR -x 1 [--max-overall-download-limit 20M] --quiet; aria2c -i LIST -j N -d DIR -x 1 -s 1 (same options);"
    echo "         curl --parallel --parallel-max N -sS -f --config F (url/output pairs); per-download limit: --max-download-limit 10M on the -x 4 rows"
fi
if case_selected checksum; then
    echo "checksum: the -x 4 rows above plus --checksum=sha-256=HEX or --checksum=sha-512=HEX (aria2c: sha-256 only)"
fi
echo "run:     cases ${SELECTED[*]}; $REPS rep(s); size scale $SCALE; settle ${SETTLE} s before each run; CSV $CSV"
echo "units:   MB = 10^6 bytes; median over successful runs; CPU = user+sys of the client; peak RSS = max over runs"

echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"

for c in "${SELECTED[@]}"; do
    note "=== case $c ==="
    STARTED+=("$c")
    "case_$c"
done
echo
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at the end"
echo "raw runs: $CSV"
