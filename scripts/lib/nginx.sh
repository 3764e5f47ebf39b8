# shellcheck shell=bash
# A private nginx for the interop scripts and the benchmark: its configuration
# (the interop scripts' nginx_interop_conf, the benchmark's nginx_bench_conf),
# starting it on a free port, stopping it by PID. No other script spells
# nginx's configuration.
# Source this file; the caller defines note() for messages and sets NGINX.
# Run as a command, it writes a configuration to standard output:
#   scripts/lib/nginx.sh interop-conf KEY=VALUE...   (the keys: see nginx_interop_conf)
#   scripts/lib/nginx.sh bench-conf KEY=VALUE...     (the keys: see nginx_bench_conf)

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

# nginx_conf_head WORK CONNECTIONS: the top of an interop script's nginx.conf up to and including the common http
# settings and the access logs in WORK (access.log, combined; timed.log); nginx_interop_conf adds the servers and
# the closing brace.
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
    # When each response ended and how long it took, with the client's user agent (the fleet's test names its
    # daemons by it): timed.log.
    log_format timed '\$msec \$request_time "\$request" \$status \$body_bytes_sent "\$http_user_agent" "\$http_range"';
    access_log $work/timed.log timed;
    keepalive_requests 10000;
EOF
}

# nginx_interop_conf KEY=VALUE...: the configuration of an interop script's nginx, from named settings (every
# address is ADDRESS:PORT, every rate an nginx size per connection: 256k):
#   dir            required: the prefix (logs, pid, temporary files; the TLS certificate in dir/tls, where
#                  make_test_certificate puts it)
#   www, listen    required: the files, and where they are served
#   connections    worker_connections (default 256)
#   allow          only this address is admitted (403 for everyone else); /ready answers anyone, to see nginx up
#   limit_path     a path served at limit_rate: exact (/slow.bin), or every path under it when it ends in /
#   metalink       an exact path served as a Metalink (application/metalink4+xml) whatever its name
#   html           an exact path served as text/html whatever its name
#   tls_listen     the same files, with the same allow, over TLS
#   mirror_listen  the same files on another origin
#   other_listen   the files of other_www on another origin
#   page_listen    the dashboard as its daemon serves it, from one origin: the page from page_root, /jsonrpc
#                  proxied to rpc_upstream, and its WebSocket upgrades to ws_upstream (default rpc_upstream)
nginx_interop_conf() {
    local dir="" www="" listen="" connections=256 allow="" limit_path="" limit_rate="" metalink="" html=""
    local tls_listen="" mirror_listen="" other_listen="" other_www="" page_listen="" page_root=""
    local rpc_upstream="" ws_upstream="" no_ranges="" kv key
    for kv in "$@"; do
        key=${kv%%=*}
        case $key in
            dir | www | listen | connections | allow | limit_path | limit_rate | metalink | html | tls_listen | \
                mirror_listen | other_listen | other_www | page_listen | page_root | rpc_upstream | ws_upstream | \
                no_ranges)
                printf -v "$key" '%s' "${kv#*=}"
                ;;
            *) echo "nginx_interop_conf: unknown setting: $kv" >&2; return 2 ;;
        esac
    done
    local required=(dir www listen)
    [[ -z $limit_path ]] || required+=(limit_rate)
    [[ -z $other_listen ]] || required+=(other_www)
    [[ -z $page_listen ]] || required+=(page_root rpc_upstream)
    for key in "${required[@]}"; do
        [[ -n ${!key} ]] || { echo "nginx_interop_conf: $key= is required" >&2; return 2; }
    done
    local access=""
    if [[ -n $allow ]]; then
        access="        allow $allow;
        deny all;"
    fi

    nginx_conf_head "$dir" "$connections"
    cat <<EOF
    server {
        listen $listen;
        server_name localhost;
        root $www;
EOF
    if [[ -n $allow ]]; then
        cat <<EOF
$access
        # answered before the access check: tells the script that nginx is up
        location = /ready { return 200 "ready\n"; }
EOF
    fi
    if [[ -n $limit_path ]]; then
        local match="= "
        [[ $limit_path != */ ]] || match=""
        cat <<EOF
        location $match$limit_path {
            limit_rate $limit_rate;
        }
EOF
    fi
    if [[ -n $no_ranges ]]; then
        cat <<EOF
        # The same files from a server without ranges: every Range is ignored, a 200 sends the whole file.
        location $no_ranges {
            alias $www/;
            max_ranges 0;
        }
EOF
    fi
    if [[ -n $metalink ]]; then
        cat <<EOF
        # A Metalink known only by its media type.
        location = $metalink {
            default_type application/metalink4+xml;
        }
EOF
    fi
    if [[ -n $html ]]; then
        cat <<EOF
        location = $html {
            types { }
            default_type text/html;
        }
EOF
    fi
    echo "    }"
    if [[ -n $tls_listen ]]; then
        cat <<EOF
    server {
        listen $tls_listen ssl;
        server_name localhost;
        ssl_certificate $dir/tls/cert.pem;
        ssl_certificate_key $dir/tls/key.pem;
        root $www;
EOF
        [[ -z $access ]] || echo "$access"
        echo "    }"
    fi
    if [[ -n $mirror_listen ]]; then
        cat <<EOF
    server {
        listen $mirror_listen;
        server_name localhost;
        root $www;
    }
EOF
    fi
    if [[ -n $other_listen ]]; then
        cat <<EOF
    server {
        listen $other_listen;
        server_name localhost;
        root $other_www;
    }
EOF
    fi
    if [[ -n $page_listen ]]; then
        cat <<EOF
    map \$http_upgrade \$connection_upgrade {
        default upgrade;
        '' close;
    }
    map \$http_upgrade \$jsonrpc_upstream {
        default ${ws_upstream:-$rpc_upstream};
        '' $rpc_upstream;
    }
    server {
        listen $page_listen;
        server_name localhost;
        types {
            text/html html;
            text/css css;
            text/javascript js;
        }
        location = / {
            root $page_root;
            try_files /index.html =404;
        }
        location /dashboard/ {
            alias $page_root/;
        }
        location = /jsonrpc {
            proxy_pass http://\$jsonrpc_upstream;
            proxy_http_version 1.1;
            proxy_set_header Upgrade \$http_upgrade;
            proxy_set_header Connection \$connection_upgrade;
            proxy_read_timeout 1h;
        }
    }
EOF
    fi
    echo "}"
}

# nginx_bench_conf KEY=VALUE...: the configuration of the benchmark's nginx (scripts/bench/server.py), from named
# settings: listen (ADDRESS:PORT), dir (prefix: logs, pid, temporary files), www (the files served),
# mirror_listen (a second server for the mirrors case; empty: none), stub_status (1: location /status), and the
# rates per connection throttle_rate, fast_rate, straggler_rate, mirror_rate, mirror_slow_rate (nginx sizes:
# 20m, 6400k). The values come from scripts/bench/cases.py, where every case is described.
nginx_bench_conf() {
    local listen="" dir="" www="" mirror_listen="" stub_status=0
    local throttle_rate="" fast_rate="" straggler_rate="" mirror_rate="" mirror_slow_rate="" kv key
    for kv in "$@"; do
        key=${kv%%=*}
        case $key in
            listen | dir | www | mirror_listen | stub_status | throttle_rate | fast_rate | straggler_rate | \
                mirror_rate | mirror_slow_rate)
                printf -v "$key" '%s' "${kv#*=}"
                ;;
            *) echo "nginx_bench_conf: unknown setting: $kv" >&2; return 2 ;;
        esac
    done
    for key in listen dir www throttle_rate fast_rate straggler_rate mirror_rate mirror_slow_rate; do
        [[ -n ${!key} ]] || { echo "nginx_bench_conf: $key= is required" >&2; return 2; }
    done
    local status="" mirror=""
    if [[ $stub_status == 1 ]]; then
        # Accepted connections so far (nginx's counter, including connections that never carried a request).
        status='        location = /status {
            stub_status;
            access_log off;
        }'
    fi
    if [[ -n $mirror_listen ]]; then
        # A second host (127.0.0.2, so that aria2's -x, which counts connections per host name, allows two to
        # each mirror) serving the same files; it logs every request's client, path and bytes to mirrors.log.
        mirror="    log_format mirrors '\$http_user_agent|\$uri|\$status|\$body_bytes_sent';
    server {
        listen $mirror_listen;
        server_name localhost;
        root $www;
        access_log $dir/mirrors.log mirrors;
        location /mirror/ {
            alias $www/;
            limit_rate $mirror_rate;
            sendfile_max_chunk 64k;
        }
        location /mirror-slow/ {
            alias $www/;
            limit_rate $mirror_slow_rate;
            sendfile_max_chunk 64k;
        }
    }"
    fi
    cat <<EOF
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
    # The manyfiles and ratelimit cases read this one (cut per run at the byte offset before the run):
    # connection serial number, request end time and duration, to count the connections a client used and the
    # server-side span.
    log_format conns '\$connection \$connection_requests \$msec \$request_time \$status \$body_bytes_sent "\$request"';
    # The cases over a link read this one (scripts/bench/measure.py): each request's connection, when it ended
    # (wall clock), how long its connection and itself had lived, and its range.
    log_format timeline '\$connection \$msec \$connection_time \$request_time \$status \$body_bytes_sent "\$http_range"';
    keepalive_requests 100000;
    keepalive_timeout 65;

    # One connection in four (serial number divisible by 4) is a straggler; 0 = no limit.
    map \$connection \$straggler_rate {
        default 0;
        "~^[048]\$" $straggler_rate;
        "~([02468][048]|[13579][26])\$" $straggler_rate;
    }

    server {
        listen $listen;
        server_name localhost;
        root $www;
        access_log $dir/access.log bench;
        access_log $dir/timeline.log timeline;

        # The serial number of this connection (to line up the straggler case).
        location = /conn {
            default_type text/plain;
            return 200 "\$connection\n";
        }
        # Without a small sendfile_max_chunk nginx sends large pieces of a response past limit_rate, and many
        # small range requests would cheat.
        location /throttled/ {
            alias $www/;
            limit_rate $throttle_rate;
            sendfile_max_chunk 64k;
        }
        location /fast/ {
            alias $www/;
            limit_rate $fast_rate;
            sendfile_max_chunk 256k;
        }
        location /straggler/ {
            alias $www/;
            limit_rate \$straggler_rate;
            sendfile_max_chunk 64k;
        }
        # The straggler case's ideal: the same small sendfile pieces, no limit.
        location /chunked/ {
            alias $www/;
            sendfile_max_chunk 64k;
        }
        # manyfiles (1,000 small files) and ratelimit: no limits, logged to conn.log only.
        location /many/ {
            alias $www/many/;
            access_log $dir/conn.log conns;
        }
        location /rl/ {
            alias $www/;
            access_log $dir/conn.log conns;
        }
        # The first mirror of the mirrors case (the second is mirror_listen).
        location /mirror/ {
            alias $www/;
            limit_rate $mirror_rate;
            sendfile_max_chunk 64k;
        }
$status
    }
$mirror
}
EOF
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -euo pipefail
    case ${1:-} in
        interop-conf) shift; nginx_interop_conf "$@" ;;
        bench-conf) shift; nginx_bench_conf "$@" ;;
        *)
            echo "usage: $0 interop-conf|bench-conf KEY=VALUE... (see nginx_interop_conf, nginx_bench_conf)" >&2
            exit 2
            ;;
    esac
fi
