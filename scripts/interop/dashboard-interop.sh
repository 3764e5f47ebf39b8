#!/usr/bin/env bash
# The daemon's dashboard in a real browser: nginx serves the test files (one at full speed, the others
# rate-limited with limit_rate), the daemon serves the page and its JSON-RPC, and scripts/interop/dashboard_test.py
# drives headless Chromium through it. Screenshots of each step go to .build/dashboard-screenshots/.
#
# Usage: scripts/interop/dashboard-interop.sh BINARY    the downpour binary; runs `BINARY daemon` (the real test)
#        scripts/interop/dashboard-interop.sh --aria2c  development: aria2c answers the RPC (no push, the page
#                                               polls) and nginx serves the page and proxies /jsonrpc to it
#        scripts/interop/dashboard-interop.sh --aria2c --push-double
#                                               development: the WebSocket goes to
#                                               scripts/dev/dashboard_push_double.py, which adds Downpour's
#                                               push (downpour.subscribe/onProgress) in front of aria2c
#
# Needs: nginx, curl, python3 with selenium, chromium and chromium-driver (Debian); aria2 for --aria2c.
set -euo pipefail

die() { echo "dashboard: $*" >&2; exit 2; }
note() { echo "dashboard: $*" >&2; }

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
DASH="$ROOT/Sources/DownpourRPC/Resources/dashboard"
[[ -f $DASH/index.html ]] || die "no dashboard at $DASH"

MODE=daemon
PUSH_DOUBLE=0
if [[ ${1:-} == --aria2c ]]; then
    MODE=aria2c
    [[ ${2:-} == --push-double ]] && PUSH_DOUBLE=1
    ARIA2C=$(command -v aria2c) || die "aria2c not found (apt-get install aria2)"
    set -- "$ARIA2C"
fi
# The binary ($1), nginx, pass/fail/sha_of.
# shellcheck source=scripts/lib/interop.sh
source "$ROOT/scripts/lib/interop.sh"
command -v curl >/dev/null || die "curl not found (apt-get install curl)"
python3 -c 'import selenium' 2>/dev/null || die "python3 cannot import selenium (pip install selenium)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/downpour-dashboard.XXXXXX")
SHOTS="$ROOT/.build/dashboard-screenshots"
NGINX_PID=""
SERVER_PID=""
DOUBLE_PID=""
OPEN_PID=""
ARIA2_PID=""
ARIA2_SECRET_PID=""

cleanup() {
    local rc=$?
    stop_pid "$DOUBLE_PID" "push double"
    stop_pid "$OPEN_PID" "daemon without a secret"
    stop_pid "$ARIA2_PID" "aria2c without a secret"
    stop_pid "$ARIA2_SECRET_PID" "aria2c with a secret"
    stop_pid "$SERVER_PID" "$MODE"
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
mkdir -p "$WWW/slow" "$OUT" "$STATE"
rm -rf -- "$SHOTS"
mkdir -p "$SHOTS"

# ---------------------------------------------------------------- test files
# fast.bin at full speed; under slow/ 256 KiB/s per connection: slow.bin takes ~12 s on 2 connections
# (time to pause and resume it), remove.bin ~24 s on one, extra.bin stays active for the layout pictures,
# queue-a/b.bin are paused and reordered.
head -c 16777216 /dev/urandom >"$WWW/fast.bin"
head -c 6291456 /dev/urandom >"$WWW/slow/slow.bin"
head -c 6291456 /dev/urandom >"$WWW/slow/remove.bin"
head -c 25165824 /dev/urandom >"$WWW/slow/extra.bin"
head -c 6291456 /dev/urandom >"$WWW/slow/queue-a.bin"
head -c 6291456 /dev/urandom >"$WWW/slow/queue-b.bin"
# late.bin is missing (404) until the browser test copies fast.bin there, then retries it.

# --------------------------------------------------------------------- nginx
# Port P: the files. In --aria2c mode also P+1: the page, with /jsonrpc proxied (WebSocket too) to aria2c
# on P+2, as the daemon serves them from one origin; with --push-double the WebSocket goes to the double
# on P+3 instead.
start_nginx() {
    local port=$1 page=()
    if [[ $MODE == aria2c ]]; then
        page=(page_listen="127.0.0.1:$((port + 1))" page_root="$DASH" rpc_upstream="127.0.0.1:$((port + 2))"
            ws_upstream="127.0.0.1:$((port + 2 + PUSH_DOUBLE))")
    fi
    nginx_interop_conf dir="$WORK" www="$WWW" listen="127.0.0.1:$port" limit_path=/slow/ limit_rate=256k \
        html=/hostile.html "${page[@]}" >"$WORK/nginx.conf" || exit 2
    launch_nginx "$WORK" "$WORK/nginx.conf" "http://127.0.0.1:$port/fast.bin"
}

start_on_free_port start_nginx 4 "$WORK"
FILES="http://127.0.0.1:$PORT"
echo "dashboard: $("$NGINX" -v 2>&1) on $FILES (pid $NGINX_PID)"

# ------------------------------------------------------------ the RPC server
SECRET="dash-$RANDOM$RANDOM"
SERVER_LOG="$WORK/server.log"
if [[ $MODE == aria2c ]]; then
    "$BIN" --no-conf --enable-rpc --rpc-listen-port="$((PORT + 2))" --rpc-secret="$SECRET" \
        --rpc-allow-origin-all -d "$OUT" --auto-file-renaming=false --allow-overwrite=false \
        --file-allocation=none --min-split-size=1M --max-connection-per-server=16 \
        --console-log-level=warn --summary-interval=0 </dev/null >"$SERVER_LOG" 2>&1 &
    SERVER_PID=$!
    PAGE="http://127.0.0.1:$((PORT + 1))/"
    for ((i = 0; i < 50; i++)); do
        curl -sf -o /dev/null --max-time 2 "$PAGE" &&
            curl -s --max-time 2 -d '{"id":1,"method":"system.listMethods"}' "${PAGE}jsonrpc" | grep -q result &&
            break
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$SERVER_LOG" >&2; die "aria2c exited"; }
        sleep 0.2
    done
    echo "dashboard: $("$BIN" --version | head -n 1) behind nginx at $PAGE (pid $SERVER_PID)"
    if [[ $PUSH_DOUBLE -eq 1 ]]; then
        python3 "$ROOT/scripts/dev/dashboard_push_double.py" --listen "$((PORT + 3))" \
            --aria2 "http://127.0.0.1:$((PORT + 2))/jsonrpc" --secret "$SECRET" </dev/null >"$WORK/double.log" 2>&1 &
        DOUBLE_PID=$!
        for ((i = 0; i < 50; i++)); do
            grep -qs 'push double on' "$WORK/double.log" && break
            kill -0 "$DOUBLE_PID" 2>/dev/null || { cat "$WORK/double.log" >&2; die "the push double exited"; }
            sleep 0.1
        done
        echo "dashboard: push double on port $((PORT + 3)) (pid $DOUBLE_PID)"
    fi
else
    "$BIN" daemon --rpc-listen-port 0 --rpc-secret "$SECRET" --state-dir "$STATE" -d "$OUT" \
        </dev/null >"$SERVER_LOG" 2>&1 &
    SERVER_PID=$!
    DPORT=""
    for ((i = 0; i < 300; i++)); do
        DPORT=$(grep -o -m 1 'http://127\.0\.0\.1:[0-9]*/jsonrpc' "$SERVER_LOG" 2>/dev/null |
            head -n 1 | sed 's#^http://127\.0\.0\.1:\([0-9]*\)/jsonrpc$#\1#' || true)
        [[ -n $DPORT ]] && break
        kill -0 "$SERVER_PID" 2>/dev/null || { sed 's/^/     | /' "$SERVER_LOG" >&2; die "the daemon exited"; }
        sleep 0.1
    done
    [[ -n $DPORT ]] || { sed 's/^/     | /' "$SERVER_LOG" >&2; die "the daemon printed no http://127.0.0.1:PORT/jsonrpc in 30 s"; }
    PAGE="http://127.0.0.1:$DPORT/"
    curl -sf -o /dev/null --max-time 5 "$PAGE" || die "the daemon does not serve the page at $PAGE"
    echo "dashboard: daemon $BIN at $PAGE (pid $SERVER_PID)"
fi

# Without the secret the page is served but tells nothing: the RPC refuses.
refusal=$(curl -s --max-time 5 -d '{"jsonrpc":"2.0","id":1,"method":"aria2.tellActive","params":[]}' \
    "${PAGE}jsonrpc" || true)
if [[ $refusal == *Unauthorized* ]]; then
    pass "the RPC refuses a call without the secret"
else
    fail "the RPC answered a call without the secret: ${refusal:0:200}"
fi

# ------------------------------------------------------------------ the page
sha() { sha_of "$WWW/$1"; }
LOG="$WORK/case.log"
rc=0
EXPECT_PUSH=()
if [[ $MODE == daemon || $PUSH_DOUBLE -eq 1 ]]; then EXPECT_PUSH=(--expect-push); fi
timeout -k 10 420 python3 "$ROOT/scripts/interop/dashboard_test.py" \
    --page "$PAGE" --secret "$SECRET" --files "$FILES" --out-dir "$OUT" --shots "$SHOTS" \
    --fast "fast.bin=$(sha fast.bin)" --slow "slow/slow.bin=$(sha slow/slow.bin)" \
    --remove "slow/remove.bin" --extra "slow/extra.bin" \
    --www "$WWW" --late "late.bin=$(sha fast.bin)" --late-source fast.bin \
    --queue slow/queue-a.bin --queue slow/queue-b.bin "${EXPECT_PUSH[@]}" </dev/null || rc=$?

# ------------------------------ a page of another origin, and the daemon without a secret (issue 25)
# A second daemon, with no secret: the page nginx serves (another origin, same site) tries a no-cors fetch,
# a form POST, a <script> JSONP and a WebSocket; the queue must stay empty and the page's directory must not
# appear. The same page against aria2c without a secret is the control: there it does add downloads. Then the
# dashboard, opened from that daemon itself, adds, pauses and removes without signing in.
rc_open=0
if [[ $MODE == daemon ]]; then
    cp "$ROOT/scripts/interop/browser/hostile.html" "$WWW/hostile.html"
    OUT2="$WORK/out-open"
    STATE2="$WORK/state-open"
    mkdir -p "$OUT2" "$STATE2"
    "$BIN" daemon --rpc-listen-port 0 --state-dir "$STATE2" -d "$OUT2" </dev/null >"$WORK/open.log" 2>&1 &
    OPEN_PID=$!
    OPORT=""
    for ((i = 0; i < 300; i++)); do
        OPORT=$(grep -o -m 1 'http://127\.0\.0\.1:[0-9]*/jsonrpc' "$WORK/open.log" 2>/dev/null |
            head -n 1 | sed 's#^http://127\.0\.0\.1:\([0-9]*\)/jsonrpc$#\1#' || true)
        [[ -n $OPORT ]] && break
        kill -0 "$OPEN_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -z $OPORT ]]; then
        sed 's/^/     | /' "$WORK/open.log" >&2
        fail "the daemon without a secret did not start"
        rc_open=1
    else
        (cd "$ROOT/scripts/interop" && timeout -k 10 120 python3 hostile_page_test.py --page-base "$FILES" \
            --file "$FILES/fast.bin" --rpc-port "$OPORT" --dir "$WORK/chosen-by-the-page" \
            --name "downpour daemon without a secret") </dev/null || rc_open=1
        if ARIA2C=$(command -v aria2c); then
            APORT=$((OPORT + 1))
            while port_in_use "$APORT"; do APORT=$((APORT + 1)); done
            "$ARIA2C" --no-conf --enable-rpc --rpc-listen-port="$APORT" -d "$WORK/aria2-out" --quiet \
                </dev/null >"$WORK/aria2.log" 2>&1 &
            ARIA2_PID=$!
            for ((i = 0; i < 100; i++)); do
                curl -s --max-time 2 -d '{"id":1,"method":"system.listMethods"}' \
                    "http://127.0.0.1:$APORT/jsonrpc" | grep -q result && break
                sleep 0.1
            done
            (cd "$ROOT/scripts/interop" && timeout -k 10 120 python3 hostile_page_test.py --page-base "$FILES" \
                --file "$FILES/fast.bin" --rpc-port "$APORT" --dir "$WORK/aria2-chosen-by-the-page" \
                --name "aria2c without a secret" --expect-attack-works) </dev/null || rc_open=1
        else
            note "aria2c not found: no control run for the hostile page"
        fi
        timeout -k 10 300 python3 "$ROOT/scripts/interop/dashboard_test.py" --no-secret \
            --page "http://127.0.0.1:$OPORT/" --files "$FILES" --out-dir "$OUT2" --shots "$SHOTS/no-secret" \
            --fast "fast.bin=$(sha fast.bin)" --slow "slow/slow.bin=$(sha slow/slow.bin)" \
            --remove "slow/remove.bin" --expect-push </dev/null || rc_open=1
    fi
fi

# ------------------------------------------- a page of another origin that holds the secret
# With a secret, the secret is the gate: scripts/interop/browser/secret-page.html, from another origin, sends
# aria2.addUri with "token:SECRET" first as a preflighted JSON fetch and as a no-cors text/plain fetch, and the
# same two with a wrong token. hostile_page_test.py --secret serves that page itself from a free port of
# 127.0.0.1 (nginx_interop_conf's html= makes only one exact path text/html, and that is /hostile.html), then
# asks the RPC (with the token) which downloads are new: the right-token ones, named by their out names, and no
# wrong-token one.
rc_secret=0
secret_page() {
    (cd "$ROOT/scripts/interop" && timeout -k 10 120 python3 hostile_page_test.py --secret "$SECRET" \
        --file "$FILES/fast.bin" "$@") </dev/null || rc_secret=1
}
if [[ $MODE == daemon ]]; then
    # The daemon started above has the secret and no --rpc-allow-origin: the preflight from any origin is
    # answered with leave to send, so both right-token adds arrive; the answer carries no CORS header, so the
    # page cannot read it (its JSON fetch throws).
    secret_page --rpc-port "$DPORT" --dir "$WORK/secret-page-dir" --name "downpour daemon with a secret" \
        --right-adds cors,no-cors --cors-readable no
    # The control: aria2c with the same secret serves any origin that holds it. Without --rpc-allow-origin-all
    # aria2c answers the preflight (OPTIONS) with a bare 200 and no Access-Control-* headers, so Chromium never
    # sends the JSON POST: only the no-cors add arrives there, and the JSON fetch throws.
    if ARIA2C=$(command -v aria2c); then
        SPORT=$((DPORT + 1))
        while port_in_use "$SPORT"; do SPORT=$((SPORT + 1)); done
        "$ARIA2C" --no-conf --enable-rpc --rpc-listen-port="$SPORT" --rpc-secret="$SECRET" \
            -d "$WORK/aria2-secret-out" --quiet </dev/null >"$WORK/aria2-secret.log" 2>&1 &
        ARIA2_SECRET_PID=$!
        up=0
        for ((i = 0; i < 100; i++)); do
            curl -s --max-time 2 -d '{"id":1,"method":"system.listMethods"}' \
                "http://127.0.0.1:$SPORT/jsonrpc" | grep -q result && { up=1; break; }
            kill -0 "$ARIA2_SECRET_PID" 2>/dev/null || break
            sleep 0.1
        done
        if [[ $up -eq 1 ]]; then
            secret_page --rpc-port "$SPORT" --dir "$WORK/aria2-secret-page-dir" --name "aria2c with a secret" \
                --right-adds no-cors --cors-readable no
        else
            sed 's/^/     | /' "$WORK/aria2-secret.log" >&2
            fail "aria2c with a secret did not start on port $SPORT"
        fi
    else
        note "aria2c not found: no control run for the page with the secret"
    fi
else
    # aria2c here runs with --rpc-allow-origin-all: both adds arrive, and the page reads the answer.
    secret_page --rpc-port "$((PORT + 2))" --dir "$WORK/secret-page-dir" \
        --name "aria2c with a secret and --rpc-allow-origin-all" --right-adds cors,no-cors --cors-readable yes
fi

if [[ $rc -ne 0 ]]; then
    echo "dashboard: $MODE log (last lines):"
    tail -n 20 "$SERVER_LOG" | sed 's/^/     | /' || true
    echo "dashboard: nginx error log (last lines):"
    tail -n 10 "$WORK/error.log" 2>/dev/null | sed 's/^/     | /' || true
fi
echo "dashboard: screenshots in $SHOTS"
if [[ $rc -ne 0 || $rc_open -ne 0 || $rc_secret -ne 0 || $FAILED -gt 0 ]]; then
    echo "dashboard: FAILED (browser test exit $rc, without a secret $rc_open, page with the secret $rc_secret," \
        "$FAILED shell check(s) failed)"
    exit 1
fi
echo "dashboard: all checks passed"
