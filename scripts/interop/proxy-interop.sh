#!/usr/bin/env bash
# Proxy test: the downpour CLI through real proxies (Debian's tinyproxy and
# microsocks) to a real nginx that admits only the proxies, all on loopback.
#
# Usage: scripts/interop/proxy-interop.sh [BINARY]     (default: .build/release/downpour)
#
# The origin (nginx on 127.0.0.1) allows 127.0.0.2 and denies everyone else
# with 403; the proxies bind their outgoing connections to 127.0.0.2
# (tinyproxy "Bind", microsocks -b). A download that succeeds went through a
# proxy; one that should bypass the proxy (--no-proxy, NO_PROXY) gets the 403.
#
# Needs: nginx, tinyproxy, microsocks, curl, openssl, coreutils, awk;
# ss (iproute2) and pgrep (procps) are used when present.
set -euo pipefail

die() { echo "proxy-interop: $*" >&2; exit 2; }
note() { echo "proxy-interop: $*" >&2; }
# The binary ($1), nginx, pass/fail/describe_rc/sha_of.
# shellcheck source=scripts/lib/interop.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/../lib/interop.sh"
TINYPROXY=$(command -v tinyproxy || true)
[[ -n $TINYPROXY ]] || TINYPROXY=/usr/sbin/tinyproxy
[[ -x $TINYPROXY ]] || die "tinyproxy not found (apt-get install tinyproxy)"
MICROSOCKS=$(command -v microsocks || true)
[[ -n $MICROSOCKS ]] || die "microsocks not found (apt-get install microsocks)"
command -v curl >/dev/null || die "curl not found (apt-get install curl)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/downpour-proxy.XXXXXX")
NGINX_PID=""
PIDS=() # the proxies

cleanup() {
    local rc=$? pid
    for pid in "${PIDS[@]}"; do
        stop_pid "$pid" proxy
    done
    stop_pid "$NGINX_PID" nginx
    rm -rf -- "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

WWW="$WORK/www"
OUT="$WORK/out"
mkdir -p "$WWW" "$OUT"

# ---------------------------------------------------------------- test files
head -c 1048576 /dev/urandom >"$WWW/one-mib.bin"
head -c 33554433 /dev/urandom >"$WWW/big.bin"
declare -A SHA
for f in one-mib.bin big.bin; do
    SHA[$f]=$(sha256sum <"$WWW/$f" | awk '{print $1}')
done

# ------------------------------------------------- a self-signed certificate
make_test_certificate "$WORK/tls" ||
    die "openssl could not make a test certificate (apt-get install openssl)"
CA="$WORK/tls/cert.pem"

# ---------------------------------------------- nginx: admits only 127.0.0.2
# The files on the given port, over TLS on the next; /ready answers anyone (nginx is up).
start_nginx() {
    local port=$1
    nginx_interop_conf dir="$WORK" www="$WWW" listen="127.0.0.1:$port" tls_listen="127.0.0.1:$((port + 1))" \
        connections=512 allow=127.0.0.2 >"$WORK/nginx.conf" || exit 2
    launch_nginx "$WORK" "$WORK/nginx.conf" "http://127.0.0.1:$port/ready"
}

start_on_free_port start_nginx 2 "$WORK"
ORIGIN_PORT=$PORT # set by start_on_free_port
BASE="http://127.0.0.1:$ORIGIN_PORT"
TLS_BASE="https://127.0.0.1:$((ORIGIN_PORT + 1))"

# ---------------------------------------------------------------- proxies
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_proxy NAME COMMAND...: runs COMMAND (with @PORT@ replaced by a free
# port) in the background until it listens; sets PROXY_PORT.
start_proxy() {
    local name=$1 candidate pid i arg
    shift
    for _ in 1 2 3 4 5 6 7 8; do
        candidate=$((20000 + (RANDOM * 32768 + RANDOM) % 40001))
        port_in_use "$candidate" && continue
        listening "$candidate" && continue
        local command=()
        for arg in "$@"; do command+=("${arg//@PORT@/$candidate}"); done
        "${command[@]}" </dev/null >>"$WORK/$name.out" 2>&1 &
        pid=$!
        for ((i = 0; i < 50; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            if listening "$candidate"; then
                PIDS+=("$pid")
                PROXY_PORT=$candidate
                return 0
            fi
            sleep 0.1
        done
        stop_pid "$pid" "$name"
        note "$name did not come up on port $candidate, retrying"
    done
    tail -n 20 "$WORK/$name.out" >&2 || true
    die "could not start $name"
}

# tinyproxy_conf NAME [EXTRA LINE]: a configuration with the port left as @PORT@.
tinyproxy_conf() {
    cat >"$WORK/$1.conf.in" <<EOF
Port @PORT@
Listen 127.0.0.1
Bind 127.0.0.2
Timeout 120
MaxClients 200
LogLevel Info
LogFile "$WORK/$1.log"
Allow 127.0.0.1
DisableViaHeader Yes
${2-}
EOF
}

# start_tinyproxy NAME: the port is only known once free, so the file is written per try.
start_tinyproxy() {
    local name=$1
    cat >"$WORK/$name.sh" <<EOF
#!/usr/bin/env bash
sed "s/@PORT@/\$1/" "$WORK/$name.conf.in" >"$WORK/$name.conf"
exec "$TINYPROXY" -d -c "$WORK/$name.conf"
EOF
    start_proxy "$name" bash "$WORK/$name.sh" @PORT@
}

tinyproxy_conf tinyproxy
start_tinyproxy tinyproxy
TP=$PROXY_PORT
tinyproxy_conf tinyproxy-auth "BasicAuth user s3cret"
start_tinyproxy tinyproxy-auth
TPA=$PROXY_PORT
start_proxy microsocks "$MICROSOCKS" -i 127.0.0.1 -p @PORT@ -b 127.0.0.2
MS=$PROXY_PORT
start_proxy microsocks-auth "$MICROSOCKS" -i 127.0.0.1 -p @PORT@ -b 127.0.0.2 -u user -P s3cret
MSA=$PROXY_PORT

echo "proxy-interop: $("$NGINX" -v 2>&1) on $BASE and $TLS_BASE (admits 127.0.0.2 only)"
echo "proxy-interop: $("$TINYPROXY" -v 2>&1 | head -n 1) on :$TP and :$TPA (BasicAuth);" \
    "microsocks on :$MS and :$MSA (-u/-P); binary $BIN"

# The name cases use "localhost" when it resolves to 127.0.0.1 first (nginx
# listens there only, and the proxies bind 127.0.0.2 outgoing).
NAME_HOST=127.0.0.1
if [[ $(getent ahosts localhost 2>/dev/null | awk 'NR == 1 { print $1 }') == 127.0.0.1 ]]; then
    NAME_HOST=localhost
else
    note "localhost does not resolve to 127.0.0.1 first; the name cases use 127.0.0.1"
fi
TLS_NAME_BASE="https://$NAME_HOST:$((ORIGIN_PORT + 1))"

# ------------------------------------------------------------------- helpers
LOG="$WORK/case.log"


PROXY_VARIABLES=(http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY)
UNSET=()
for v in "${PROXY_VARIABLES[@]}"; do UNSET+=(-u "$v"); done

# run_dp [NAME=VALUE...] -- ARGS...: runs the binary with a timeout, no stdin,
# none of the caller's proxy variables but the given ones, output in $LOG;
# sets RC (never trips set -e).
run_dp() {
    local assignments=()
    while [[ $# -gt 0 && $1 != -- ]]; do
        assignments+=("$1")
        shift
    done
    [[ ${1-} == -- ]] && shift
    RC=0
    timeout -k 10 "$CASE_TIMEOUT" env "${UNSET[@]}" "${assignments[@]}" "$BIN" "$@" </dev/null >"$LOG" 2>&1 || RC=$?
}



# expect_file LABEL FILE URL [NAME=VALUE...] -- ARGS...: downloads URL to a
# fresh output with ARGS; passes when it exits 0 with FILE's bytes.
expect_file() {
    local label=$1 file=$2 url=$3 out
    shift 3
    out="$OUT/case.bin"
    rm -f -- "$out" "$out".*
    local assignments=()
    while [[ $# -gt 0 && $1 != -- ]]; do
        assignments+=("$1")
        shift
    done
    [[ ${1-} == -- ]] && shift
    run_dp "${assignments[@]}" -- get "$url" -o "$out" --quiet "$@"
    if [[ $RC -ne 0 ]]; then
        fail "$label: $(describe_rc "$RC")"
    elif [[ ! -f $out ]]; then
        fail "$label: exit 0 but no output file"
    elif [[ $(sha_of "$out") != "${SHA[$file]}" ]]; then
        fail "$label: sha256 mismatch"
    else
        pass "$label"
    fi
    rm -f -- "$out" "$out".*
}

# expect_failure LABEL CODE TEXT URL [NAME=VALUE...] -- ARGS...: passes when
# the download exits with CODE, its output says TEXT, and no file is left.
expect_failure() {
    local label=$1 code=$2 text=$3 url=$4 out
    shift 4
    out="$OUT/case.bin"
    rm -f -- "$out" "$out".*
    local assignments=()
    while [[ $# -gt 0 && $1 != -- ]]; do
        assignments+=("$1")
        shift
    done
    [[ ${1-} == -- ]] && shift
    run_dp "${assignments[@]}" -- get "$url" -o "$out" --max-tries 1 "$@"
    if [[ $RC -ne $code ]]; then
        fail "$label: expected exit code $code, got $(describe_rc "$RC")"
    elif ! grep -qF -- "$text" "$LOG"; then
        fail "$label: exit $code, but the output does not say '$text'"
    elif [[ -e $out ]]; then
        fail "$label: exit $code, but the output file exists"
    else
        pass "$label"
    fi
    rm -f -- "$out" "$out".*
}

HTTP_PROXY_URL="http://127.0.0.1:$TP"
AUTH_PROXY_URL="http://user:s3cret@127.0.0.1:$TPA"
SOCKS_HOST="127.0.0.1:$MS"

# ------------------------------------------------- the origin refuses direct
expect_failure "direct http -> 403 (the origin admits only the proxies)" 3 "403" "$BASE/one-mib.bin" --
expect_failure "direct https -> 403" 3 "403" "$TLS_BASE/one-mib.bin" -- --ca-certificate "$CA"

# ------------------------------------------------------------ HTTP proxy
expect_file "http proxy (tinyproxy), http URL, -x 4" one-mib.bin "$BASE/one-mib.bin" -- \
    --http-proxy "$HTTP_PROXY_URL" -x 4
expect_file "http proxy (tinyproxy), http URL, 32 MiB -x 8" big.bin "$BASE/big.bin" -- \
    --all-proxy "$HTTP_PROXY_URL" -x 8
expect_file "http proxy (tinyproxy), https URL (CONNECT + TLS), -x 4" one-mib.bin "$TLS_BASE/one-mib.bin" -- \
    --https-proxy "$HTTP_PROXY_URL" --ca-certificate "$CA" -x 4
expect_file "http proxy (tinyproxy), https://$NAME_HOST (SNI through CONNECT)" one-mib.bin \
    "$TLS_NAME_BASE/one-mib.bin" -- --all-proxy "127.0.0.1:$TP" --ca-certificate "$CA"
expect_file "http proxy with user:password (BasicAuth), http URL" one-mib.bin "$BASE/one-mib.bin" -- \
    --all-proxy "$AUTH_PROXY_URL" -x 4
expect_file "http proxy with user:password (BasicAuth), https URL" big.bin "$TLS_BASE/big.bin" -- \
    --all-proxy "$AUTH_PROXY_URL" --ca-certificate "$CA" -x 8
expect_file "http proxy with a percent-encoded password" one-mib.bin "$BASE/one-mib.bin" -- \
    --all-proxy "http://user:s3cr%65t@127.0.0.1:$TPA"
expect_failure "http proxy wanting credentials, none given -> exit 4, says 407" 4 "407" "$BASE/one-mib.bin" -- \
    --all-proxy "http://127.0.0.1:$TPA"
expect_failure "http proxy, wrong password -> exit 4, says check the password" 4 "check the user name and password" \
    "$BASE/one-mib.bin" -- --all-proxy "http://user:wrong@127.0.0.1:$TPA"

# ------------------------------------------------------------ SOCKS5
expect_file "socks5h (microsocks), http URL, -x 4" one-mib.bin "$BASE/one-mib.bin" -- \
    --all-proxy "socks5h://$SOCKS_HOST" -x 4
expect_file "socks5h (microsocks), https://$NAME_HOST, 32 MiB -x 8" big.bin "$TLS_NAME_BASE/big.bin" -- \
    --all-proxy "socks5h://$SOCKS_HOST" --ca-certificate "$CA" -x 8
expect_file "socks5 (microsocks, resolved here), http://$NAME_HOST" one-mib.bin \
    "http://$NAME_HOST:$ORIGIN_PORT/one-mib.bin" -- --http-proxy "socks5://$SOCKS_HOST"
expect_file "socks5 (microsocks, resolved here), https://$NAME_HOST (SNI kept)" one-mib.bin \
    "$TLS_NAME_BASE/one-mib.bin" -- --https-proxy "socks5://$SOCKS_HOST" --ca-certificate "$CA" -x 4
expect_file "socks5h with user:password (microsocks -u/-P, RFC 1929), -x 4" one-mib.bin "$BASE/one-mib.bin" -- \
    --all-proxy "socks5h://user:s3cret@127.0.0.1:$MSA" -x 4
expect_file "socks5 with user:password, https://$NAME_HOST, 32 MiB -x 8" big.bin "$TLS_NAME_BASE/big.bin" -- \
    --all-proxy "socks5://user:s3cret@127.0.0.1:$MSA" --ca-certificate "$CA" -x 8
expect_failure "socks5h with a wrong password -> exit 4, named" 4 "refused the user name and password" \
    "$BASE/one-mib.bin" -- --all-proxy "socks5h://user:wrong@127.0.0.1:$MSA"
expect_failure "socks5 proxy wanting credentials, none given (microsocks -u/-P) -> exit 4" 4 "requires authentication" \
    "$BASE/one-mib.bin" -- --all-proxy "socks5h://127.0.0.1:$MSA"
expect_failure "https:// proxy (TLS to the proxy) -> exit 2" 2 "TLS to the proxy" "$BASE/one-mib.bin" -- \
    --all-proxy "https://127.0.0.1:$TP"
expect_failure "no proxy listening -> exit 4, names the proxy" 4 "proxy" "$BASE/one-mib.bin" -- \
    --all-proxy "http://127.0.0.1:1"

# ------------------------------------------------- the environment, as curl
expect_file "http_proxy (environment), http URL" one-mib.bin "$BASE/one-mib.bin" \
    "http_proxy=$HTTP_PROXY_URL" --
expect_failure "HTTP_PROXY upper case is ignored, as curl does -> direct -> 403" 3 "403" "$BASE/one-mib.bin" \
    "HTTP_PROXY=$HTTP_PROXY_URL" --
expect_file "HTTPS_PROXY (environment), https URL" one-mib.bin "$TLS_BASE/one-mib.bin" \
    "HTTPS_PROXY=$AUTH_PROXY_URL" -- --ca-certificate "$CA"
expect_file "https_proxy beats ALL_PROXY" one-mib.bin "$TLS_BASE/one-mib.bin" \
    "https_proxy=$HTTP_PROXY_URL" "ALL_PROXY=http://127.0.0.1:1" -- --ca-certificate "$CA"
expect_file "ALL_PROXY=socks5h (environment)" one-mib.bin "$BASE/one-mib.bin" "ALL_PROXY=socks5h://$SOCKS_HOST" --
expect_file "all_proxy=socks5 (environment), https" one-mib.bin "$TLS_NAME_BASE/one-mib.bin" \
    "all_proxy=socks5://$SOCKS_HOST" -- --ca-certificate "$CA"
expect_file "--all-proxy beats the environment's proxies" one-mib.bin "$BASE/one-mib.bin" \
    "http_proxy=http://127.0.0.1:1" -- --all-proxy "socks5h://$SOCKS_HOST"
expect_failure "a bad proxy variable -> exit 2, names it" 2 "https_proxy" "$TLS_BASE/one-mib.bin" \
    "https_proxy=socks4://127.0.0.1:1" --

# ---------------------------------------------------------- bypassing it
expect_failure "--no-proxy 127.0.0.1 bypasses --all-proxy -> direct -> 403" 3 "403" "$BASE/one-mib.bin" -- \
    --all-proxy "$HTTP_PROXY_URL" --no-proxy "example.com,127.0.0.1"
expect_failure "--no-proxy '*' bypasses everything -> 403" 3 "403" "$TLS_BASE/one-mib.bin" -- \
    --all-proxy "socks5h://$SOCKS_HOST" --no-proxy '*' --ca-certificate "$CA"
expect_failure "--no-proxy 127.0.0.0/8 (a network) -> 403" 3 "403" "$BASE/one-mib.bin" -- \
    --all-proxy "$HTTP_PROXY_URL" --no-proxy "127.0.0.0/8"
expect_failure "NO_PROXY=.$NAME_HOST bypasses https_proxy for https://$NAME_HOST -> 403" 3 "403" \
    "$TLS_NAME_BASE/one-mib.bin" "https_proxy=$HTTP_PROXY_URL" "NO_PROXY=.$NAME_HOST" -- \
    --ca-certificate "$CA"
expect_failure "no_proxy applies to --all-proxy too, as with curl -x -> 403" 3 "403" "$BASE/one-mib.bin" \
    "no_proxy=127.0.0.1" -- --all-proxy "$HTTP_PROXY_URL"
expect_file "NO_PROXY for another port keeps the proxy" one-mib.bin "$BASE/one-mib.bin" \
    "NO_PROXY=127.0.0.1:1" "http_proxy=$HTTP_PROXY_URL" --
expect_file "--no-proxy '' replaces NO_PROXY" one-mib.bin "$BASE/one-mib.bin" \
    "NO_PROXY=*" "http_proxy=$HTTP_PROXY_URL" -- --no-proxy ''

# ------------------------------------------------- an input file (aria2's names)
cat >"$WORK/list.txt" <<EOF
$BASE/one-mib.bin
  out=via-socks.bin
  all-proxy=socks5h://$SOCKS_HOST
$TLS_BASE/big.bin
  out=via-http-proxy.bin
  https-proxy=$AUTH_PROXY_URL
  ca-certificate=$CA
  split=8
$BASE/one-mib.bin
  out=direct.bin
  no-proxy=127.0.0.1
EOF
mkdir -p "$OUT/batch"
run_dp -- get -i "$WORK/list.txt" -d "$OUT/batch" --all-proxy "$HTTP_PROXY_URL" --quiet
if [[ $RC -eq 3 && $(sha_of "$OUT/batch/via-socks.bin" 2>/dev/null) == "${SHA[one-mib.bin]}" &&
    $(sha_of "$OUT/batch/via-http-proxy.bin" 2>/dev/null) == "${SHA[big.bin]}" && ! -e $OUT/batch/direct.bin ]]; then
    pass "-i with all-proxy, https-proxy, no-proxy per entry (two via proxies, the direct one 403)"
else
    fail "-i with per-entry proxies: $(describe_rc "$RC"), files: $(find "$OUT/batch" -mindepth 1 -printf '%f ' 2>/dev/null)"
fi

# ------------------------------------------------------------------- summary
if [[ $FAILED -gt 0 ]]; then
    echo "proxy-interop: logs (last lines):"
    for f in error.log tinyproxy.log tinyproxy-auth.log microsocks.out microsocks-auth.out; do
        if [[ -s $WORK/$f ]]; then
            tail -n 5 "$WORK/$f" | sed "s#^#     | $f: #"
        fi
    done
fi
echo "proxy-interop: $PASSED passed, $FAILED failed"
if [[ $FAILED -gt 0 ]]; then
    exit 1
fi
