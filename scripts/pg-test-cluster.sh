#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for tests, from Debian's postgresql-15 package.
#   pg-test-cluster.sh start DIR   -> initdb in DIR, start on a free port, print the connection URL
#   pg-test-cluster.sh stop DIR    -> stop it and remove DIR
#   pg-test-cluster.sh pause DIR   -> stop it at once (-m immediate: backends die, as in a crash)
#   pg-test-cluster.sh resume DIR  -> start it again on the same port (an outage test's recovery)
# PostgreSQL refuses to run as root, so as root the cluster belongs to the 'postgres' user.
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?directory}
bin=/usr/lib/postgresql/15/bin
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
case "$cmd" in
  start)
    [ -x "$bin/initdb" ] || { echo "pg-test-cluster: $bin/initdb missing (apt-get install postgresql-15)" >&2; exit 1; }
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$dir"; chmod 700 "$dir"; fi
    as_owner "$bin/initdb" -D "$dir/data" -U gpuhub --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null \
      || shuf -i 20000-60000 -n 1)
    echo "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=200" >"$dir/options"
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$(cat "$dir/options")" start >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U gpuhub gpuhub_test
    echo "postgresql://gpuhub@127.0.0.1:$port/gpuhub_test"
    ;;
  stop)
    if [ -d "$dir/data" ]; then as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true; fi
    rm -rf "$dir"
    ;;
  pause)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
    ;;
  resume)
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$(cat "$dir/options")" start >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    ;;
  *) echo "usage: $0 start|stop|pause|resume DIR" >&2; exit 2 ;;
esac
