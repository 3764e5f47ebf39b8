#!/usr/bin/env bash
# HLS interoperability test: streams that Debian's ffmpeg makes from a test pattern (MPEG-TS, fragmented MP4,
# AES-128, a multivariant playlist of two variants with a separate audio rendition, a video with WebVTT subtitles,
# one file cut by byte ranges, with and without gaps), served by a real nginx on 127.0.0.1. `downpour get URL` must
# save each as one file that ffprobe reads whole and that is, byte for byte, the segments in playlist order
# (decrypted by openssl for AES-128); the frames of the MPEG-TS, fMP4 and AES-128 outputs must have the checksums
# (ffmpeg -f framemd5) of ffmpeg's own copy of the same playlist; the subtitles must be one WebVTT file ffprobe
# reads; nginx must send each byte range once, and nothing in a gap; --media=file must save the playlist itself;
# and a download killed with -9 must go on without fetching again a segment it had whole. Through `downpour
# daemon`, driven by aria2p (a real aria2 client), the multivariant playlist must be one download whose files[0] is
# the video and files[1] the audio.
#
# Usage: scripts/interop/hls-interop.sh [BINARY]     (default: .build/release/downpour)
#
# Needs: ffmpeg (ffmpeg, ffprobe), nginx, curl, openssl, coreutils.
set -euo pipefail

die() { echo "hls-interop: $*" >&2; exit 2; }
note() { echo "hls-interop: $*" >&2; }
# shellcheck source=scripts/lib/interop.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/../lib/interop.sh"
for tool in ffmpeg ffprobe openssl curl; do
    command -v "$tool" >/dev/null || die "$tool not found (apt-get install ffmpeg openssl curl)"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/downpour-hls-interop.XXXXXX")
NGINX_PID=""
GET_PID=""
DAEMON_PID=""
LOG="$WORK/case.log"
cleanup() {
    local rc=$?
    [[ -z $GET_PID ]] || kill -9 "$GET_PID" 2>/dev/null || true
    stop_pid "$DAEMON_PID" daemon
    stop_pid "$NGINX_PID" nginx
    rm -rf -- "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

WWW="$WORK/www"
mkdir -p "$WWW"/{ts,fmp4,aes,slow,subs,single,gaps,master/low,master/high,master/audio}

# ------------------------------------------------------------------ streams
note "making the streams with ffmpeg"
VIDEO=(-f lavfi -i testsrc=size=640x360:rate=25)
AUDIO=(-f lavfi -i sine=frequency=440:sample_rate=48000)
HLS=(-t 20 -f hls -hls_time 1 -hls_playlist_type vod)
ENCODE=(-c:v libx264 -preset ultrafast -g 25 -c:a aac)
ff() { ffmpeg -hide_banner -loglevel error -y "$@" </dev/null; }
ff "${VIDEO[@]}" "${AUDIO[@]}" "${ENCODE[@]}" "${HLS[@]}" -hls_segment_filename "$WWW/ts/s%03d.ts" "$WWW/ts/ts.m3u8"
ff "${VIDEO[@]}" "${AUDIO[@]}" "${ENCODE[@]}" "${HLS[@]}" -hls_segment_type fmp4 \
    -hls_fmp4_init_filename init.mp4 -hls_segment_filename "$WWW/fmp4/f%03d.m4s" "$WWW/fmp4/fmp4.m3u8"
openssl rand 16 >"$WWW/aes/key.bin"
IV=$(openssl rand -hex 16)
printf 'key.bin\n%s\n%s\n' "$WWW/aes/key.bin" "$IV" >"$WORK/keyinfo"
ff "${VIDEO[@]}" "${AUDIO[@]}" "${ENCODE[@]}" "${HLS[@]}" -hls_key_info_file "$WORK/keyinfo" \
    -hls_segment_filename "$WWW/aes/e%03d.ts" "$WWW/aes/aes.m3u8"
cp "$WWW"/ts/* "$WWW/slow/"
# One file, its segments given as byte ranges (EXT-X-BYTERANGE); and a playlist of it with segments 5, 6 and the
# last left out: byte ranges with gaps, and unused bytes at the end.
ff "${VIDEO[@]}" "${AUDIO[@]}" "${ENCODE[@]}" "${HLS[@]}" -hls_flags single_file \
    -hls_segment_filename "$WWW/single/single.ts" "$WWW/single/single.m3u8"
cp "$WWW/single/single.ts" "$WWW/gaps/"
last=$(grep -c '^#EXTINF' "$WWW/single/single.m3u8")
awk -v last="$last" '/^#EXTINF/ { n++ } n != 5 && n != 6 && (n != last || /^#EXT-X-ENDLIST/)' \
    "$WWW/single/single.m3u8" >"$WWW/gaps/gaps.m3u8"
ff -f lavfi -i testsrc=size=320x180:rate=25 -an -c:v libx264 -preset ultrafast -g 25 "${HLS[@]}" \
    -hls_segment_filename "$WWW/master/low/l%03d.ts" "$WWW/master/low/index.m3u8"
ff -f lavfi -i testsrc=size=640x360:rate=25 -an -c:v libx264 -preset ultrafast -g 25 "${HLS[@]}" \
    -hls_segment_filename "$WWW/master/high/h%03d.ts" "$WWW/master/high/index.m3u8"
ff "${AUDIO[@]}" -vn -c:a aac "${HLS[@]}" -hls_segment_filename "$WWW/master/audio/a%03d.ts" \
    "$WWW/master/audio/index.m3u8"
cat >"$WWW/master/master.m3u8" <<'EOF'
#EXTM3U
#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",NAME="English",LANGUAGE="en",DEFAULT=YES,AUTOSELECT=YES,URI="audio/index.m3u8"
#EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=320x180,CODECS="avc1.42c00d,mp4a.40.2",AUDIO="aac"
low/index.m3u8
#EXT-X-STREAM-INF:BANDWIDTH=1200000,RESOLUTION=640x360,CODECS="avc1.42c01e,mp4a.40.2",AUDIO="aac"
high/index.m3u8
EOF

# A video with English subtitles: ffmpeg segments an SRT file into WebVTT segments and their playlist.
printf '1\n00:00:01,000 --> 00:00:02,500\nHello there\n\n2\n00:00:05,000 --> 00:00:06,000\nSecond line\n\n3\n00:00:13,000 --> 00:00:15,000\nThird line\n' \
    >"$WORK/subs.srt"
ff -f lavfi -i testsrc=size=320x180:rate=25 -i "$WORK/subs.srt" -t 20 -c:v libx264 -preset ultrafast -g 25 \
    -c:s webvtt -map 0:v -map 1:s -f hls -hls_time 4 -hls_playlist_type vod \
    -var_stream_map "v:0,s:0,sgroup:subs,language:en" -hls_segment_filename "$WWW/subs/v%v_%03d.ts" \
    "$WWW/subs/out_%v.m3u8"
cat >"$WWW/subs/master.m3u8" <<'EOF'
#EXTM3U
#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",LANGUAGE="en",DEFAULT=YES,URI="out_0_vtt.m3u8"
#EXT-X-STREAM-INF:BANDWIDTH=600000,RESOLUTION=320x180,CODECS="avc1.42c00d",SUBTITLES="subs"
out_0.m3u8
EOF

# segments DIR PLAYLIST: the segment files of a media playlist, in its order, as paths.
segments() { grep -v '^#' "$1/$2" | grep -v '^$' | sed "s|^|$1/|"; }

start_nginx() {
    nginx_interop_conf dir="$WORK" www="$WWW" listen="127.0.0.1:$1" limit_path=/slow/ limit_rate=40k \
        >"$WORK/nginx.conf" || exit 2
    launch_nginx "$WORK" "$WORK/nginx.conf" "http://127.0.0.1:$1/ts/ts.m3u8"
}
start_on_free_port start_nginx 1 "$WORK"
BASE="http://127.0.0.1:$PORT"
note "nginx on port $PORT"

# check_file NAME ACTUAL EXPECTED-FILE: ACTUAL is byte for byte EXPECTED-FILE, and ffprobe reads it whole.
check_file() {
    local name=$1 actual=$2 expected=$3 duration
    if [[ ! -f $actual ]]; then
        fail "$name: $actual was not saved"
        return
    fi
    if ! cmp -s "$actual" "$expected"; then
        fail "$name: $actual differs from the segments ($(stat -c %s "$actual") vs $(stat -c %s "$expected") bytes)"
        return
    fi
    duration=$(ffprobe -v error -show_entries format=duration -of csv=p=0 "$actual" 2>>"$LOG" || echo 0)
    if ! awk -v d="$duration" 'BEGIN { exit !(d >= 19.5 && d <= 20.5) }'; then
        fail "$name: ffprobe reads $duration s of $actual, not 20 s"
        return
    fi
    pass "$name: $(stat -c %s "$actual") bytes, byte for byte the segments, $duration s"
}

# frames FILE: each frame's stream and MD5 as ffmpeg decodes FILE (-f framemd5), without the time stamps (a copy
# may round them by one tick).
frames() {
    ffmpeg -hide_banner -loglevel error -i "$1" -map 0 -f framemd5 - 2>>"$LOG" </dev/null \
        | awk -F', *' '!/^#/ { print $1, $6 }'
}

# check_frames NAME ACTUAL URL EXT: ffmpeg's own copy of the playlist at URL (-c copy into a .EXT file) decodes to the
# frames ACTUAL decodes to.
check_frames() {
    local name=$1 actual=$2 url=$3 copy="$WORK/ffmpeg-copy.$4" count
    rm -f "$copy"
    if ! ffmpeg -hide_banner -loglevel error -i "$url" -c copy "$copy" </dev/null 2>>"$LOG"; then
        fail "$name: ffmpeg could not copy $url"
        return
    fi
    frames "$actual" >"$WORK/frames.actual"
    frames "$copy" >"$WORK/frames.copy"
    count=$(wc -l <"$WORK/frames.copy")
    if [[ $count -gt 0 ]] && cmp -s "$WORK/frames.actual" "$WORK/frames.copy"; then
        pass "$name: the $count frames' checksums (framemd5) are those of ffmpeg's own copy"
    else
        fail "$name: the frames' checksums differ from ffmpeg's own copy ($(wc -l <"$WORK/frames.actual") vs $count)"
    fi
}

# get NAME OUT ARGS...: downpour get ARGS into OUT; a failure is recorded.
get() {
    local name=$1 out=$2 rc=0
    shift 2
    mkdir -p "$out"
    timeout -k 5 "$CASE_TIMEOUT" "$BIN" get -q -d "$out" "$@" >"$LOG" 2>&1 || rc=$?
    [[ $rc -eq 0 ]] || fail "$name: downpour get $* ended with $(describe_rc "$rc")"
    return "$rc"
}

# ------------------------------------------------------------------- cases
OUT="$WORK/out"

# shellcheck disable=SC2046 # the segment paths are plain names
cat $(segments "$WWW/ts" ts.m3u8) >"$WORK/ts.expected"
if get "MPEG-TS" "$OUT" "$BASE/ts/ts.m3u8"; then
    check_file "MPEG-TS" "$OUT/ts.ts" "$WORK/ts.expected"
    check_frames "MPEG-TS" "$OUT/ts.ts" "$BASE/ts/ts.m3u8" ts
fi

# shellcheck disable=SC2046
cat "$WWW/fmp4/init.mp4" $(segments "$WWW/fmp4" fmp4.m3u8) >"$WORK/fmp4.expected"
if get "fMP4" "$OUT" "$BASE/fmp4/fmp4.m3u8"; then
    check_file "fMP4" "$OUT/fmp4.mp4" "$WORK/fmp4.expected"
    check_frames "fMP4" "$OUT/fmp4.mp4" "$BASE/fmp4/fmp4.m3u8" mp4
fi

KEY=$(od -An -tx1 "$WWW/aes/key.bin" | tr -d ' \n')
: >"$WORK/aes.expected"
while read -r segment; do
    openssl aes-128-cbc -d -K "$KEY" -iv "$IV" -in "$segment" >>"$WORK/aes.expected"
done < <(segments "$WWW/aes" aes.m3u8)
if get "AES-128" "$OUT" "$BASE/aes/aes.m3u8"; then
    check_file "AES-128" "$OUT/aes.ts" "$WORK/aes.expected"
    check_frames "AES-128" "$OUT/aes.ts" "$BASE/aes/aes.m3u8" ts
fi

# shellcheck disable=SC2046
cat $(segments "$WWW/master/high" index.m3u8) >"$WORK/high.expected"
# shellcheck disable=SC2046
cat $(segments "$WWW/master/audio" index.m3u8) >"$WORK/audio.expected"
if get "multivariant" "$OUT" "$BASE/master/master.m3u8"; then
    check_file "multivariant: the highest bandwidth" "$OUT/master.ts" "$WORK/high.expected"
    if cmp -s "$OUT/master.audio.ts" "$WORK/audio.expected"; then
        pass "multivariant: the audio rendition beside it, byte for byte"
    else
        fail "multivariant: $OUT/master.audio.ts is not the audio rendition's segments"
    fi
fi

# shellcheck disable=SC2046
cat $(segments "$WWW/subs" out_0.m3u8) >"$WORK/subs.expected"
if get "subtitles" "$WORK/subs" --media-subtitles=en "$BASE/subs/master.m3u8"; then
    check_file "subtitles: the video" "$WORK/subs/master.ts" "$WORK/subs.expected"
    cues=$(ffprobe -v error -show_entries packet=pts_time -of csv=p=0 "$WORK/subs/master.en.vtt" 2>>"$LOG" \
        | wc -l)
    texts=$(grep -c -e '^Hello there$' -e '^Second line$' -e '^Third line$' "$WORK/subs/master.en.vtt" || true)
    headers=$(grep -c '^WEBVTT' "$WORK/subs/master.en.vtt" || true)
    if [[ $cues -eq 3 && $texts -eq 3 && $headers -eq 1 ]]; then
        pass "subtitles: master.en.vtt is one WebVTT file, and ffprobe reads its 3 cues"
    else
        fail "subtitles: master.en.vtt has $headers headers, $texts of the 3 lines, ffprobe reads $cues cues"
    fi
fi

if get "byte ranges" "$OUT" "$BASE/single/single.m3u8"; then
    check_file "byte ranges of one file" "$OUT/single.ts" "$WWW/single/single.ts"
    sent=$(awk '$4 == "/single/single.ts" { sum += $7 } END { print sum + 0 }' "$WORK/timed.log")
    all=$(stat -c %s "$WWW/single/single.ts")
    if [[ $sent -eq $all ]]; then
        pass "byte ranges of one file: nginx sent each byte once"
    else
        fail "byte ranges of one file: nginx sent $sent bytes of a $all-byte file"
    fi
fi
# The ranges the gapped playlist keeps, cut from the file: the expected output and the bytes nginx may send.
: >"$WORK/gaps.expected"
kept=0
while IFS=@ read -r length offset; do
    dd if="$WWW/gaps/single.ts" bs=64K iflag=skip_bytes,count_bytes skip="$offset" count="$length" status=none \
        >>"$WORK/gaps.expected"
    kept=$((kept + length))
done < <(sed -n 's/^#EXT-X-BYTERANGE://p' "$WWW/gaps/gaps.m3u8")
if get "byte ranges with gaps" "$WORK/gaps" -x 4 "$BASE/gaps/gaps.m3u8"; then
    # timed.log: $msec $request_time "GET PATH HTTP/1.1" $status $body_bytes_sent ...
    sent=$(awk '$4 == "/gaps/single.ts" && $6 == 206 { sum += $7 } END { print sum + 0 }' "$WORK/timed.log")
    whole=$(awk '$4 == "/gaps/single.ts" && $6 != 206 { n++ } END { print n + 0 }' "$WORK/timed.log")
    if ! cmp -s "$WORK/gaps/gaps.ts" "$WORK/gaps.expected"; then
        fail "byte ranges with gaps: gaps.ts is not the playlist's ranges in order"
    elif [[ $sent -ne $kept || $whole -ne 0 ]]; then
        fail "byte ranges with gaps: nginx sent $sent bytes for the $kept in the ranges ($whole other answers)"
    else
        pass "byte ranges with gaps: $kept bytes, the ranges in order; nginx sent just those"
    fi
fi

if get "--media=file" "$WORK/saved" --media=file "$BASE/ts/ts.m3u8"; then
    if cmp -s "$WORK/saved/ts.m3u8" "$WWW/ts/ts.m3u8" && [[ ! -e $WORK/saved/ts.ts ]]; then
        pass "--media=file saves the playlist itself"
    else
        fail "--media=file: the playlist was not saved as it is"
    fi
fi

# kill -9 in the middle, then the same command again: the segments that were whole are not fetched again.
RESUME="$WORK/resume"
mkdir -p "$RESUME"
"$BIN" get -q -x 4 -d "$RESUME" "$BASE/slow/ts.m3u8" >"$LOG" 2>&1 </dev/null &
GET_PID=$!
whole=()
for ((i = 0; i < 600; i++)); do
    mapfile -t whole < <(find "$RESUME/ts.ts.hls/video" -maxdepth 1 -name 'segment-*' ! -name '*.part*' \
        -printf '%f\n' 2>/dev/null)
    [[ ${#whole[@]} -lt 4 ]] || break
    kill -0 "$GET_PID" 2>/dev/null || break
    sleep 0.05
done
kill -9 "$GET_PID" 2>/dev/null || true
wait "$GET_PID" 2>/dev/null || true
GET_PID=""
if [[ ${#whole[@]} -lt 4 || -e $RESUME/ts.ts ]]; then
    fail "kill -9: the download did not stop midway (${#whole[@]} segments whole when it was killed)"
elif get "kill -9, then again" "$RESUME" -x 4 "$BASE/slow/ts.m3u8"; then
    check_file "kill -9 after ${#whole[@]} segments, then again" "$RESUME/ts.ts" "$WORK/ts.expected"
    mapfile -t names < <(grep -v '^#' "$WWW/slow/ts.m3u8" | grep -v '^$')
    twice=()
    for file in "${whole[@]}"; do
        name=${names[${file#segment-}]}
        count=$(grep -c "\"GET /slow/$name HTTP" "$WORK/timed.log" || true)
        [[ $count -eq 1 ]] || twice+=("$name ($count requests)")
    done
    if [[ ${#twice[@]} -eq 0 ]]; then
        pass "kill -9: none of the ${#whole[@]} whole segments was asked for again"
    else
        fail "kill -9: whole segments were fetched again: ${twice[*]}"
    fi
    if [[ -e $RESUME/ts.ts.hls ]]; then fail "kill -9: $RESUME/ts.ts.hls was left behind"; fi
fi

# The daemon: aria2.addUri of the multivariant playlist is one download; tellStatus lists the video and the audio.
DAEMON_OUT="$WORK/daemon-out"
mkdir -p "$DAEMON_OUT" "$WORK/state"
SECRET="hls-$RANDOM$RANDOM"
"$BIN" daemon --rpc-listen-port 0 --rpc-secret "$SECRET" --state-dir "$WORK/state" -d "$DAEMON_OUT" \
    >"$WORK/daemon.out" 2>"$WORK/daemon.err" </dev/null &
DAEMON_PID=$!
RPC_PORT=""
for ((i = 0; i < 100; i++)); do
    RPC_PORT=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\)/jsonrpc.*|\1|p' "$WORK/daemon.out" | head -n 1)
    [[ -n $RPC_PORT ]] && break
    kill -0 "$DAEMON_PID" 2>/dev/null || break
    sleep 0.1
done
if [[ -z $RPC_PORT ]]; then
    cp "$WORK/daemon.err" "$LOG"
    fail "daemon: it did not say where it listens"
elif ! python3 -c 'import aria2p' 2>/dev/null; then
    fail "daemon: aria2p is not installed (pip install aria2p)"
else
    # One line: status, then each file as path|length|completedLength, then the error message.
    timeout -k 5 "$CASE_TIMEOUT" python3 - "$RPC_PORT" "$SECRET" "$BASE/master/master.m3u8" >"$LOG" 2>&1 <<'PY' || true
import sys, time
import aria2p

port, secret, url = sys.argv[1], sys.argv[2], sys.argv[3]
api = aria2p.API(aria2p.Client(host="http://127.0.0.1", port=int(port), secret=secret))
download = api.add_uris([url])
deadline = time.monotonic() + 100
while time.monotonic() < deadline:
    download.update()
    if download.status in ("complete", "error", "removed"):
        break
    time.sleep(0.1)
files = " ".join(f"{f.path}|{f.length}|{f.completed_length}" for f in download.files)
print(download.status, download.total_length, files, download.error_message or "")
PY
    read -r status total video audio _ <"$LOG" || true
    if [[ $status != complete ]]; then
        fail "daemon: the playlist's download ended $status"
    else
        check_file "daemon: files[0], the highest bandwidth" "${video%%|*}" "$WORK/high.expected"
        expected_video="$DAEMON_OUT/master.ts|$(stat -c %s "$WORK/high.expected")"
        expected_audio="$DAEMON_OUT/master.audio.ts|$(stat -c %s "$WORK/audio.expected")"
        if [[ ${video%|*} == "$expected_video" && ${audio%|*} == "$expected_audio" ]] \
            && cmp -s "$DAEMON_OUT/master.audio.ts" "$WORK/audio.expected" \
            && [[ $total -eq $(($(stat -c %s "$WORK/high.expected") + $(stat -c %s "$WORK/audio.expected"))) ]]; then
            pass "daemon: one download, files[0] the video and files[1] the audio, $total bytes in all"
        else
            fail "daemon: tellStatus says $total bytes, files $video $audio"
        fi
        leftovers=$(find "$DAEMON_OUT" -mindepth 1 ! -name master.ts ! -name master.audio.ts -printf '%f ' || true)
        if [[ -z $leftovers ]]; then pass "daemon: nothing else left"; else fail "daemon: left behind: $leftovers"; fi
    fi
fi

echo "hls-interop: $PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
