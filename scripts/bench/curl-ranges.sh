#!/usr/bin/env bash
# curl-ranges.sh URL OUT N SIZE: the throttled case's ceiling. N curl processes at once, each fetching its Nth
# of the file with one range request and writing it at its offset into OUT (no probe, no splitting, no sync):
# what nginx itself delivers at N x its per-connection limit.
set -uo pipefail
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
exit "$rc"
