#!/usr/bin/env bash
# Starts and stops a throw-away OpenStack Swift with its S3 API (s3api + tempauth) on loopback,
# for the S3 blob backend's tests and benchmarks.
#
#   scripts/swift-s3.sh start DIR PORT [BUCKET...]   # 3-5 s; prints the s3:// URL to use
#   scripts/swift-s3.sh stop DIR
#
# The proxy answers on http://127.0.0.1:PORT (path-style, region us-east-1, access key
# `test:tester`, secret `testing`); account, container and object servers take PORT+1..PORT+3,
# memcached PORT+4. Exit status 4: a port was taken (pick another range; best below the
# kernel's ephemeral range, /proc/sys/net/ipv4/ip_local_port_range). Everything lives under DIR (wiped at start); PIDs go to DIR/run/*.pid and
# `stop` ends exactly those processes. Each BUCKET is created after start.
#
# SWIFT_S3_ACCESS_LOG_UDP=PORT sends the proxy's access log to 127.0.0.1:PORT (UDP syslog).
# When SWIFT_S3_OWNER_PID is set, a watchdog stops the engine once that process is gone, so a
# test run that crashes does not leave servers behind.
#
# Facts measured here (see ../shared/scaleout/README.md): s3api demands x-amz-content-sha256
# and checks it (400 BadDigest); it takes no aws-chunked bodies and no conditional PUT. Never
# install python3-swiftclient: its `swift` command shadows the Swift compiler driver.
set -euo pipefail

usage() { echo "usage: $0 start DIR PORT [BUCKET...] | stop DIR" >&2; exit 2; }

stop_engine() {  # TERM every process at once, KILL what is left after 5 s
  local dir=$1 f pids=()
  for f in "$dir"/run/*.pid; do
    [ -f "$f" ] || continue
    pids+=("$(cat "$f")"); rm -f "$f"
  done
  ((${#pids[@]})) || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 50); do
    local alive=0 p
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

# True when something already listens on 127.0.0.1:$1 (bash's /dev/tcp, no extra tools).
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_engine() {
  local dir=$1 port=$2; shift 2
  local me; me=$(id -un)
  for s in proxy account container object; do
    command -v "swift-$s-server" >/dev/null || { echo "swift-s3: swift-$s-server is not installed (scripts/deps.sh)" >&2; exit 3; }
  done
  command -v memcached >/dev/null || { echo "swift-s3: memcached is not installed (scripts/deps.sh)" >&2; exit 3; }
  # A healthcheck answered by someone else's server must not pass for ours.
  for p in $port $((port+1)) $((port+2)) $((port+3)) $((port+4)); do
    if listening "$p"; then echo "swift-s3: port $p is in use" >&2; exit 4; fi
  done
  [ -d "$dir/run" ] && stop_engine "$dir"
  rm -rf "$dir"; mkdir -p "$dir"/{etc,node/d1,run,log}

  conf() {  # name port pipeline
    printf '[DEFAULT]\nbind_ip = 127.0.0.1\nbind_port = %s\nworkers = 0\nuser = %s\nswift_dir = %s/etc\ndevices = %s/node\nmount_check = false\nlog_level = WARNING\nbind_timeout = 2\n[pipeline:main]\npipeline = %s\n' \
      "$2" "$me" "$dir" "$dir" "$3" > "$dir/etc/$1-server.conf"
  }
  conf account $((port+1)) account-server;     printf '[app:account-server]\nuse = egg:swift#account\n' >> "$dir/etc/account-server.conf"
  conf container $((port+2)) container-server; printf '[app:container-server]\nuse = egg:swift#container\n' >> "$dir/etc/container-server.conf"
  conf object $((port+3)) object-server;       printf '[app:object-server]\nuse = egg:swift#object\n' >> "$dir/etc/object-server.conf"
  conf proxy "$port" "catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo proxy-logging proxy-server"
  cat >> "$dir/etc/proxy-server.conf" <<EOF
[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true
[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:$((port+4))
[filter:s3api]
use = egg:swift#s3api
location = us-east-1
[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = testing .admin
[filter:proxy-logging]
use = egg:swift#proxy_logging
EOF
  # Opt-in: the proxy's access log (one line per request, the client's and its middleware's) as
  # syslog datagrams to 127.0.0.1:PORT, where a benchmark counts the requests Larder made.
  if [ -n "${SWIFT_S3_ACCESS_LOG_UDP:-}" ]; then
    printf 'access_log_level = INFO\naccess_log_udp_host = 127.0.0.1\naccess_log_udp_port = %s\n' \
      "$SWIFT_S3_ACCESS_LOG_UDP" >> "$dir/etc/proxy-server.conf"
  fi
  for f in catch_errors gatekeeper healthcheck listing_formats copy slo dlo; do
    printf '[filter:%s]\nuse = egg:swift#%s\n' "$f" "$f"
  done >> "$dir/etc/proxy-server.conf"
  # Debian's Swift is a module of the system Python, whatever `python3` is first on PATH.
  /usr/bin/python3 - "$dir/etc" "$port" <<'PY'
import sys
from swift.common.ring import RingBuilder
for i, n in enumerate(("account", "container", "object"), 1):
    b = RingBuilder(8, 1, 1); port = int(sys.argv[2]) + i
    b.add_dev({"id": 0, "region": 1, "zone": 1, "ip": "127.0.0.1", "port": port, "replication_ip": "127.0.0.1",
               "replication_port": port, "device": "d1", "weight": 1, "meta": ""})
    b.rebalance(); b.get_ring().save(f"{sys.argv[1]}/{n}.ring.gz"); b.save(f"{sys.argv[1]}/{n}.builder")
PY
  local mu=(); [ "$(id -u)" = 0 ] && mu=(-u nobody)
  memcached -l 127.0.0.1 -p $((port+4)) -U 0 -m 64 "${mu[@]}" >"$dir/log/memcached.log" 2>&1 &
  echo $! > "$dir/run/memcached.pid"
  for s in account container object proxy; do
    "swift-$s-server" "$dir/etc/$s-server.conf" -v >"$dir/log/$s.log" 2>&1 &
    echo $! > "$dir/run/$s.pid"
  done
  if [ -n "${SWIFT_S3_OWNER_PID:-}" ]; then
    ( trap '' HUP
      while kill -0 "$SWIFT_S3_OWNER_PID" 2>/dev/null; do sleep 1; done
      stop_engine "$dir"; rm -rf "$dir" ) </dev/null >/dev/null 2>&1 &
    echo $! > "$dir/watchdog.pid"
  fi

  up() { curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$1/"; }
  local ok=""
  for _ in $(seq 900); do
    for f in "$dir"/run/*.pid; do
      kill -0 "$(cat "$f")" 2>/dev/null || { echo "swift-s3: $(basename "$f" .pid) exited" >&2; break 2; }
    done
    if up $((port+1)) && up $((port+2)) && up $((port+3)) \
       && curl -fs --max-time 1 -o /dev/null "http://127.0.0.1:$port/healthcheck"; then ok=1; break; fi
    sleep 0.1
  done
  if [ -z "$ok" ]; then
    echo "swift-s3: swift did not start" >&2; tail -n 20 "$dir"/log/*.log >&2; stop_engine "$dir"
    # A port taken between the check and the bind (a client's ephemeral port): try another.
    if grep -qs "Could not bind" "$dir"/log/*.log; then exit 4; fi
    exit 1
  fi

  # Buckets through Swift's native API (tempauth token), so no S3 signing is needed here.
  if (($#)); then
    local token
    token=$(curl -fs -D - -o /dev/null -H 'X-Auth-User: test:tester' -H 'X-Auth-Key: testing' \
      "http://127.0.0.1:$port/auth/v1.0" | tr -d '\r' | sed -n 's/^[Xx]-[Aa]uth-[Tt]oken: //p')
    for b in "$@"; do
      curl -fs -o /dev/null -X PUT -H "X-Auth-Token: $token" "http://127.0.0.1:$port/v1/AUTH_test/$b" \
        || { echo "swift-s3: could not create bucket $b" >&2; stop_engine "$dir"; exit 1; }
    done
  fi
  echo "s3://${1:-BUCKET}?endpoint=http://127.0.0.1:$port&region=us-east-1&path-style=1"
}

case "${1:-}" in
  start) [ $# -ge 3 ] || usage; dir=$2; port=$3; shift 3; start_engine "$dir" "$port" "$@" ;;
  stop) [ $# -ge 2 ] || usage
        [ -f "$2/watchdog.pid" ] && { kill "$(cat "$2/watchdog.pid")" 2>/dev/null || true; rm -f "$2/watchdog.pid"; }
        stop_engine "$2" ;;
  *) usage ;;
esac
