# shellcheck shell=bash
# Shared by the interop scripts (interop, proxy-interop, daemon-interop, dashboard-interop, aria2-differential):
# the binary, nginx (and scripts/lib/nginx.sh, which writes its configuration), and the pass/fail record of the
# cases. Source it after defining die(); it needs $1 (the binary), and LOG and CASE_TIMEOUT when the cases run.

# shellcheck source=scripts/lib/nginx.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/nginx.sh"

BIN=${1:-.build/release/downpour}
CASE_TIMEOUT=${INTEROP_CASE_TIMEOUT:-120}
[[ -f $BIN && -x $BIN ]] || die "binary not found or not executable: $BIN"
case $BIN in /*) ;; *) BIN="$PWD/$BIN" ;; esac

NGINX=$(command -v nginx || true)
[[ -n $NGINX ]] || NGINX=/usr/sbin/nginx
[[ -x $NGINX ]] || die "nginx not found (apt-get install nginx)"

PASSED=0
FAILED=0

pass() { PASSED=$((PASSED + 1)); printf 'ok   %s\n' "$*"; }
fail() {
    FAILED=$((FAILED + 1))
    printf 'FAIL %s\n' "$*"
    if [[ -s $LOG ]]; then
        sed 's/^/     | /' "$LOG" | tail -n 15
    fi
}

describe_rc() {
    case $1 in
        124 | 137) echo "timed out after ${CASE_TIMEOUT}s" ;;
        *) echo "exit code $1" ;;
    esac
}

sha_of() { sha256sum <"$1" | awk '{print $1}'; }
