#!/usr/bin/env bash
# Interoperability test: the downpour CLI against a real nginx (Debian's
# package) serving static files on 127.0.0.1.
#
# Usage: scripts/interop/interop.sh [BINARY]     (default: .build/release/downpour)
#
# Needs: nginx, curl, coreutils (sha256sum, timeout, mktemp, stat), awk;
# ss (iproute2) and pgrep (procps) are used when present.
set -euo pipefail

die() { echo "interop: $*" >&2; exit 2; }
note() { echo "interop: $*" >&2; }
# The binary ($1), nginx, pass/fail/describe_rc/sha_of.
# shellcheck source=scripts/lib/interop.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/../lib/interop.sh"
command -v curl >/dev/null || die "curl not found (apt-get install curl)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/downpour-interop.XXXXXX")
NGINX_PID=""

stop_nginx() {
    stop_pid "$NGINX_PID" nginx
    NGINX_PID=""
}

cleanup() {
    local rc=$?
    stop_nginx
    rm -rf -- "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

WWW="$WORK/www"
OUT="$WORK/out"
# A mirror whose big.bin has another length (for the mirror cases).
WWW_OTHER="$WORK/www-other"
mkdir -p "$WWW" "$OUT" "$WWW_OTHER"

# ---------------------------------------------------------------- test files
head -c 1048576 /dev/urandom >"$WWW/one-mib.bin"
head -c 104857601 /dev/urandom >"$WWW/big.bin"
: >"$WWW/empty.bin"
FILES=(one-mib.bin big.bin empty.bin)
declare -A SHA SIZE
for f in "${FILES[@]}"; do
    SHA[$f]=$(sha256sum <"$WWW/$f" | awk '{print $1}')
    SIZE[$f]=$(stat -c %s "$WWW/$f")
done
head -c 104857000 "$WWW/big.bin" >"$WWW_OTHER/big.bin"

# ------------------------------------------------- a self-signed certificate
# For 127.0.0.1 (IP SAN) and localhost; valid two days; thrown away with $WORK.
make_test_certificate "$WORK/tls" ||
    die "openssl could not make a test certificate (apt-get install openssl)"

# --------------------------------------------------------------------- nginx
# Starts nginx on the given port: the files, a Metalink at /latest known only by its media type; TLS on the next
# port; mirrors on the two after: the same files, and another length of big.bin.
start_nginx() {
    local port=$1
    nginx_interop_conf dir="$WORK" www="$WWW" listen="127.0.0.1:$port" metalink=/latest \
        tls_listen="127.0.0.1:$((port + 1))" mirror_listen="127.0.0.1:$((port + 2))" \
        other_listen="127.0.0.1:$((port + 3))" other_www="$WWW_OTHER" >"$WORK/nginx.conf" || exit 2
    launch_nginx "$WORK" "$WORK/nginx.conf" "http://127.0.0.1:$port/one-mib.bin"
}

start_on_free_port start_nginx 4 "$WORK"
BASE="http://127.0.0.1:$PORT"
TLS_BASE="https://127.0.0.1:$((PORT + 1))"
MIRROR_BASE="http://127.0.0.1:$((PORT + 2))"
OTHER_BASE="http://127.0.0.1:$((PORT + 3))"
echo "interop: $("$NGINX" -v 2>&1) on $BASE (pid $NGINX_PID), binary $BIN"

# ------------------------------------------------------------------- helpers
LOG="$WORK/case.log"


now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# run_dp ARGS...: runs the binary with a timeout, no stdin, output in $LOG;
# sets RC (never trips set -e).
run_dp() {
    RC=0
    timeout -k 10 "$CASE_TIMEOUT" "$BIN" "$@" </dev/null >"$LOG" 2>&1 || RC=$?
}


# leftovers PATH: prints any partial/control files next to PATH
# (PATH.part, PATH.part.downpour, other PATH.* and hidden .NAME* siblings).
leftovers() {
    local dir base
    dir=$(dirname -- "$1")
    base=$(basename -- "$1")
    find "$dir" -mindepth 1 -maxdepth 1 \
        \( -name "$base.*" -o -name ".$base" -o -name ".$base.*" \) \
        -printf '%f ' 2>/dev/null | sed 's/ $//' || true
}


# ------------------------------------------------------ matrix: file x splits
for f in "${FILES[@]}"; do
    for n in 1 4 16; do
        out="$OUT/$f.$n"
        label=$(printf '%-12s -x %-3s' "$f" "$n")
        t0=$(now)
        run_dp get "$BASE/$f" -o "$out" -x "$n" --quiet
        t1=$(now)
        secs=$(elapsed "$t0" "$t1")
        left=$(leftovers "$out")
        if [[ $RC -ne 0 ]]; then
            fail "$label  $(describe_rc "$RC")  ${secs} s"
        elif [[ ! -f $out ]]; then
            fail "$label  exit 0 but no output file"
        elif [[ -n $left ]]; then
            fail "$label  left behind: $left"
        elif [[ $(sha_of "$out") != "${SHA[$f]}" ]]; then
            fail "$label  sha256 mismatch ($(stat -c %s "$out") bytes, expected ${SIZE[$f]})"
        else
            pass "$(printf '%s %10s bytes  %5s s' "$label" "${SIZE[$f]}" "$secs")"
        fi
        rm -f -- "$out" "$out".* # keep disk use low (big.bin is 100 MiB)
    done
done

# ------------------------------------------------------------- other checks
# 404 -> exit 3, no output, no partial files.
out="$OUT/missing.bin"
run_dp get "$BASE/missing.bin" -o "$out" --quiet
left=$(leftovers "$out")
if [[ $RC -ne 3 ]]; then
    fail "404 missing.bin: expected exit code 3, got $(describe_rc "$RC")"
elif [[ -e $out ]]; then
    fail "404 missing.bin: output file was created"
elif [[ -n $left ]]; then
    fail "404 missing.bin: left behind: $left"
else
    pass "404 missing.bin -> exit 3, no output file"
fi
rm -f -- "$out" "$out".*

# Existing output without --overwrite -> exit 6, file untouched.
out="$OUT/existing.bin"
head -c 4096 /dev/urandom >"$out"
cp -- "$out" "$WORK/existing.ref"
run_dp get "$BASE/one-mib.bin" -o "$out" --quiet
left=$(leftovers "$out")
if [[ $RC -ne 6 ]]; then
    fail "existing output: expected exit code 6, got $(describe_rc "$RC")"
elif ! cmp -s -- "$out" "$WORK/existing.ref"; then
    fail "existing output: exit 6 but the existing file was modified"
elif [[ -n $left ]]; then
    fail "existing output: left behind: $left"
else
    pass "existing output -> exit 6, file unchanged"
fi

# Same with --overwrite -> success, file replaced.
cp -- "$WORK/existing.ref" "$out"
run_dp get "$BASE/one-mib.bin" -o "$out" --overwrite --quiet
left=$(leftovers "$out")
if [[ $RC -ne 0 ]]; then
    fail "--overwrite: $(describe_rc "$RC")"
elif [[ ! -f $out || $(sha_of "$out") != "${SHA[one-mib.bin]}" ]]; then
    fail "--overwrite: output is not the downloaded file"
elif [[ -n $left ]]; then
    fail "--overwrite: left behind: $left"
else
    pass "--overwrite replaces the existing file"
fi
rm -f -- "$out" "$out".*

# -d DIR without -o -> DIR/<name from URL>.
dir="$OUT/dir"
mkdir -p "$dir"
run_dp get "$BASE/one-mib.bin" -d "$dir" --quiet
out="$dir/one-mib.bin"
left=$(leftovers "$out")
if [[ $RC -ne 0 ]]; then
    fail "-d DIR: $(describe_rc "$RC")"
elif [[ ! -f $out ]]; then
    fail "-d DIR: no $out (dir has: $(find "$dir" -mindepth 1 -maxdepth 1 -printf '%f ')))"
elif [[ $(sha_of "$out") != "${SHA[one-mib.bin]}" ]]; then
    fail "-d DIR: sha256 mismatch"
elif [[ -n $left ]]; then
    fail "-d DIR: left behind: $left"
else
    pass "-d DIR saves as DIR/one-mib.bin"
fi

# ------------------------------------------------------------------ Metalink
# one-mib.bin described by a Metalink 4 document with its size, digest and
# piece digests (256 KiB pieces); WRONG_PIECE (0-based) gets a wrong digest.
write_metalink() {
    local url=$1 wrong_piece=${2:--1} index=0 digest
    printf '<?xml version="1.0" encoding="UTF-8"?>\n'
    printf '<metalink xmlns="urn:ietf:params:xml:ns:metalink">\n'
    printf '  <file name="ml.bin">\n    <size>%s</size>\n' "${SIZE[one-mib.bin]}"
    printf '    <hash type="sha-256">%s</hash>\n' "${SHA[one-mib.bin]}"
    printf '    <pieces length="262144" type="sha-256">\n'
    while [[ $((index * 262144)) -lt ${SIZE[one-mib.bin]} ]]; do
        digest=$(dd if="$WWW/one-mib.bin" bs=262144 skip="$index" count=1 status=none | sha256sum | awk '{print $1}')
        if [[ $index -eq $wrong_piece ]]; then digest=$(printf '%s' "$digest" | tr '0-9a-f' '1-9a-f0'); fi
        printf '      <hash>%s</hash>\n' "$digest"
        index=$((index + 1))
    done
    printf '    </pieces>\n    <url priority="1">%s</url>\n  </file>\n</metalink>\n' "$url"
}
write_metalink "$BASE/one-mib.bin" >"$WWW/one-mib.meta4"
cp -- "$WWW/one-mib.meta4" "$WWW/latest"
write_metalink "$BASE/one-mib.bin" 2 >"$WORK/bad-piece.meta4"

# -M: checked piece by piece, SHA-256-identical.
dir="$OUT/ml-file"
run_dp get -M "$WWW/one-mib.meta4" -d "$dir" -x 4 --quiet
if [[ $RC -eq 0 && $(sha_of "$dir/ml.bin") == "${SHA[one-mib.bin]}" && -z $(leftovers "$dir/ml.bin") ]]; then
    pass "-M with piece digests: sha256 matches"
else
    fail "-M with piece digests: $(describe_rc "$RC")"
fi
# Metalink by URL: by the .meta4 suffix and by nginx's Content-Type; the document itself is not saved.
for path in one-mib.meta4 latest; do
    dir="$OUT/ml-$path"
    run_dp get "$BASE/$path" -d "$dir" -x 4 --quiet
    listing=$(find "$dir" -mindepth 1 -maxdepth 1 -printf '%f ' 2>/dev/null | sed 's/ $//')
    if [[ $RC -eq 0 && $listing == "ml.bin" && $(sha_of "$dir/ml.bin") == "${SHA[one-mib.bin]}" ]]; then
        pass "Metalink by URL ($path): its file downloaded, sha256 matches"
    else
        fail "Metalink by URL ($path): $(describe_rc "$RC"), directory has: $listing"
    fi
done
# --follow-metalink=false saves the document.
out="$OUT/saved.meta4"
run_dp get "$BASE/one-mib.meta4" -o "$out" --follow-metalink=false --quiet
if [[ $RC -eq 0 ]] && cmp -s -- "$out" "$WWW/one-mib.meta4"; then
    pass "--follow-metalink=false saves the document"
else
    fail "--follow-metalink=false: $(describe_rc "$RC")"
fi
# A piece whose digest never matches: fetched three times, exit 10, nothing left.
dir="$OUT/ml-bad"
run_dp get -M "$WORK/bad-piece.meta4" -d "$dir" -x 4 --quiet
if [[ $RC -eq 10 && ! -e $dir/ml.bin && -z $(leftovers "$dir/ml.bin") ]] && grep -q "Piece 2 " "$LOG"; then
    pass "-M with a bad piece digest -> exit 10 naming piece 2, no file"
else
    fail "-M with a bad piece digest: expected exit 10 and no file, got $(describe_rc "$RC"): $(head -c 300 "$LOG")"
fi
rm -rf -- "$OUT"/ml-* "$OUT/saved.meta4"

# ------------------------------------------------------------------ mirrors
# mirror_case LABEL EXPECT_NOTICE URL...: several URLs of big.bin are mirrors of one file; the file must be
# identical, nothing left behind, and (when EXPECT_NOTICE is not empty) the output must say that mirror was dropped.
mirror_case() {
    local label=$1 notice=$2
    shift 2
    local out="$OUT/mirror.bin"
    run_dp get "$@" -o "$out" -x 8 --max-tries 2 --retry-wait 0
    local left
    left=$(leftovers "$out")
    if [[ $RC -ne 0 ]]; then
        fail "mirrors, $label: $(describe_rc "$RC")"
    elif [[ ! -f $out || $(sha_of "$out") != "${SHA[big.bin]}" ]]; then
        fail "mirrors, $label: sha256 mismatch"
    elif [[ -n $left ]]; then
        fail "mirrors, $label: left behind: $left"
    elif [[ -n $notice ]] && ! grep -q "Dropped the mirror $notice" "$LOG"; then
        fail "mirrors, $label: no notice that $notice was dropped"
    else
        pass "mirrors, $label: sha256 matches"
    fi
    rm -f -- "$out" "$out".*
}
mirror_case "two origins" "" "$BASE/big.bin" "$MIRROR_BASE/big.bin"
mirror_case "a 404 first" "$BASE/missing.bin" "$BASE/missing.bin" "$MIRROR_BASE/big.bin"
mirror_case "a dead port first" "http://127.0.0.1:1/big.bin" "http://127.0.0.1:1/big.bin" "$BASE/big.bin"
mirror_case "another length" "$OTHER_BASE/big.bin" "$BASE/big.bin" "$OTHER_BASE/big.bin" "$MIRROR_BASE/big.bin"

# Every mirror failing: the last error's exit status (a 404: 3), no file.
out="$OUT/mirror-dead.bin"
run_dp get "http://127.0.0.1:1/big.bin" "$BASE/missing.bin" -o "$out" --max-tries 2 --retry-wait 0 --quiet
left=$(leftovers "$out")
if [[ $RC -eq 3 && ! -e $out && -z $left ]]; then
    pass "mirrors, all failing -> exit 3, no file"
else
    fail "mirrors, all failing: expected exit 3 and no file, got $(describe_rc "$RC")"
fi
rm -f -- "$out" "$out".*

# ---------------------------------------------------------------------- TLS
# Verified against the given CA file: success, identical bytes.
out="$OUT/tls-ca.bin"
run_dp get "$TLS_BASE/one-mib.bin" -o "$out" -x 4 --ca-certificate "$WORK/tls/cert.pem" --quiet
if [[ $RC -eq 0 && -f $out && $(sha_of "$out") == "${SHA[one-mib.bin]}" ]]; then
    pass "https with --ca-certificate: verified, sha256 matches"
else
    fail "https with --ca-certificate: $(describe_rc "$RC")"
fi
rm -f -- "$out" "$out".*

# A self-signed certificate is refused by default: network error (exit 4), no file.
out="$OUT/tls-default.bin"
run_dp get "$TLS_BASE/one-mib.bin" -o "$out" --quiet --max-tries 1
left=$(leftovers "$out")
if [[ $RC -eq 4 && ! -e $out && -z $left ]]; then
    pass "https with an untrusted certificate -> exit 4, no file"
else
    fail "https with an untrusted certificate: expected exit 4 and no file, got $(describe_rc "$RC")"
fi
rm -f -- "$out" "$out".*

# --insecure skips verification.
out="$OUT/tls-insecure.bin"
run_dp get "$TLS_BASE/one-mib.bin" -o "$out" -x 4 --insecure --quiet
if [[ $RC -eq 0 && -f $out && $(sha_of "$out") == "${SHA[one-mib.bin]}" ]]; then
    pass "https with --insecure: sha256 matches"
else
    fail "https with --insecure: $(describe_rc "$RC")"
fi
rm -f -- "$out" "$out".*

# ------------------------------------------------------------------- summary
if [[ $FAILED -gt 0 ]]; then
    echo "interop: nginx error log (last lines):"
    tail -n 10 "$WORK/error.log" 2>/dev/null | sed 's/^/     | /' || true
fi
echo "interop: $PASSED passed, $FAILED failed"
if [[ $FAILED -gt 0 ]]; then
    exit 1
fi
