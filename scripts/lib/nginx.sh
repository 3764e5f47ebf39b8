# shellcheck shell=bash
# A private nginx for scripts/interop.sh and scripts/bench.sh: its shared
# configuration lines, starting it on a free port, stopping it by PID.
# Source this file; the caller defines note() for messages and sets NGINX.

# stop_pid PID NAME: SIGTERM, up to 5 s, then SIGKILL (and the children seen
# before, so that nginx workers are not orphaned).
stop_pid() {
    local pid=$1 name=$2 children="" i
    [[ -n $pid ]] || return 0
    if command -v pgrep >/dev/null; then
        children=$(pgrep -P "$pid" || true)
    fi
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        note "$name (pid $pid) did not stop in 5 s, killing it"
        kill -9 "$pid" 2>/dev/null || true
    fi
    for i in $children; do
        kill -9 "$i" 2>/dev/null || true
    done
    wait "$pid" 2>/dev/null || true
}

port_in_use() {
    command -v ss >/dev/null || return 1
    [[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]]
}

# nginx_user_line: as root, workers would otherwise run as "nobody" and could
# not read the 0700 work directory.
nginx_user_line() {
    if [[ $(id -u) -eq 0 ]]; then echo "user root;"; fi
}

# nginx_http_common DIR: http-block lines every configuration here shares:
# temporary paths under DIR/tmp, .bin files as octet-stream, sendfile.
nginx_http_common() {
    local dir=$1
    cat <<EOC
    client_body_temp_path $dir/tmp/client_body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    types {
        application/octet-stream bin;
    }
    default_type application/octet-stream;
    sendfile on;
EOC
}

# launch_nginx DIR CONF URL: runs nginx (prefix DIR, config CONF) in the
# background and sets NGINX_PID; returns 0 once URL answers, 1 when nginx
# exited or did not answer within 5 s (it is stopped then).
launch_nginx() {
    local dir=$1 conf=$2 url=$3 i
    mkdir -p "$dir/tmp"
    "$NGINX" -p "$dir/" -c "$conf" -e "$dir/error.log" -g 'daemon off;' </dev/null >>"$dir/nginx.out" 2>&1 &
    NGINX_PID=$!
    for ((i = 0; i < 50; i++)); do
        if ! kill -0 "$NGINX_PID" 2>/dev/null; then
            wait "$NGINX_PID" 2>/dev/null || true
            NGINX_PID=""
            return 1
        fi
        if curl -sf -o /dev/null --max-time 2 "$url"; then
            return 0
        fi
        sleep 0.1
    done
    stop_pid "$NGINX_PID" nginx
    NGINX_PID=""
    return 1
}

# start_on_free_port START WIDTH DIR: up to 8 random ports P (with P .. P +
# WIDTH - 1 all free), calling START P until it returns 0; sets PORT, or exits 1
# with nginx's log from DIR.
start_on_free_port() {
    local start=$1 width=$2 dir=$3 candidate k busy
    PORT=""
    for _ in 1 2 3 4 5 6 7 8; do
        candidate=$((20000 + (RANDOM * 32768 + RANDOM) % 40001))
        busy=0
        for ((k = 0; k < width; k++)); do
            port_in_use "$((candidate + k))" && busy=1
        done
        [[ $busy -eq 0 ]] || continue
        if "$start" "$candidate"; then
            # shellcheck disable=SC2034 # read by the caller
            PORT=$candidate
            return 0
        fi
        note "nginx did not come up on port $candidate, retrying"
    done
    note "could not start nginx; its log:"
    tail -n 20 "$dir/error.log" "$dir/nginx.out" >&2 2>/dev/null || true
    exit 1
}

# make_test_certificate DIR: a self-signed certificate for 127.0.0.1 (IP SAN) and localhost, valid two days,
# as DIR/cert.pem and DIR/key.pem.
make_test_certificate() {
    local dir=$1
    mkdir -p "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=127.0.0.1" \
        -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
        -keyout "$dir/key.pem" -out "$dir/cert.pem" >/dev/null 2>&1
}

# nginx_conf_head WORK CONNECTIONS: the top of a private nginx.conf up to and including the common http
# settings and an access log in WORK; the caller adds its servers and the closing brace.
nginx_conf_head() {
    local work=$1 connections=$2
    cat <<EOF
$(nginx_user_line)
worker_processes 1;
error_log $work/error.log;
pid $work/nginx.pid;
events {
    worker_connections $connections;
}
http {
$(nginx_http_common "$work")
    access_log $work/access.log;
    keepalive_requests 10000;
EOF
}
