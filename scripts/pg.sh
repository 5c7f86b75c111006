#!/usr/bin/env bash
# A throw-away PostgreSQL on loopback, for the PostgreSQL pass of the tests and for trying the
# catalog out:   scripts/pg.sh start DIR PORT   |   scripts/pg.sh stop DIR
# For crash tests: scripts/pg.sh crash DIR (pg_ctl stop -m immediate: no checkpoint, as a power
# cut would leave it) and scripts/pg.sh restart DIR (same port and settings, after recovery).
# start prints the catalog URL (postgresql://postgres@127.0.0.1:PORT/postgres, trust auth) and
# exits 3 when the server binaries are not installed (`apt-get install postgresql`).
# FSYNC=on keeps the server durable (crash tests); by default it runs with fsync=off for speed.
# initdb refuses to run as root: as root the server runs as the `postgres` user, so every parent
# of DIR must be traversable by it.
set -euo pipefail
cmd=${1:?usage: pg.sh start|stop|crash|restart DIR [PORT]}; dir=${2:?usage: pg.sh start|stop|crash|restart DIR [PORT]}; port=${3:-15432}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
as=(); [ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
case "$cmd" in
  start)
    [ -n "$bin" ] && [ -x "$bin/initdb" ] || { echo "pg.sh: PostgreSQL server binaries not found" >&2; exit 3; }
    rm -rf "$dir"; mkdir -p "$dir"; chmod 755 "$dir"
    [ ${#as[@]} -gt 0 ] && chown postgres: "$dir"
    "${as[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 --no-sync >/dev/null
    durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    [ "${FSYNC:-off}" = on ] && durability="-c fsync=on"
    echo "-k $dir -p $port -h 127.0.0.1 -c max_connections=300 $durability" > "$dir/options"
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 -o "$(cat "$dir/options")" start >/dev/null
    echo "postgresql://postgres@127.0.0.1:$port/postgres"
    ;;
  crash)
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
    ;;
  restart)
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$(cat "$dir/options")" start >/dev/null
    ;;
  stop)
    if [ -d "$dir/data" ] && [ -n "$bin" ]; then
      "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *) echo "usage: pg.sh start|stop|crash|restart DIR [PORT]" >&2; exit 2 ;;
esac
