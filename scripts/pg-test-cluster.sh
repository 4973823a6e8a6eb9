#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for tests, from Debian's postgresql-15 package.
#   pg-test-cluster.sh start DIR   -> initdb in DIR, start on a free port, print the connection URL
#   pg-test-cluster.sh stop DIR    -> stop it (and a replica) and remove DIR
#   pg-test-cluster.sh pause DIR   -> stop it at once (-m immediate: backends die, as in a crash)
#   pg-test-cluster.sh resume DIR  -> start it again on the same port (an outage test's recovery)
#   pg-test-cluster.sh start-replicated DIR
#       -> a primary and a synchronous streaming replica (pg_basebackup, application_name
#          replica1, synchronous_standby_names on the primary); prints the multi-host URL
#          postgresql://gpuhub@127.0.0.1:P1,127.0.0.1:P2/gpuhub_test?target_session_attrs=read-write
#          once the replica streams in sync
#   pg-test-cluster.sh fail-over DIR
#       -> the primary crashes (pg_ctl stop -m immediate) and the replica is promoted (pg_ctl
#          promote), as an operator or Patroni would do; returns once the new primary accepts
#          writes
# PostgreSQL refuses to run as root, so as root the cluster belongs to the 'postgres' user.
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?directory}
bin=/usr/lib/postgresql/15/bin
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null \
    || shuf -i 20000-60000 -n 1
}
# start_server DATA_DIR PORT LOG [extra -c settings...]
start_server() {
  local data=$1 port=$2 log=$3; shift 3
  as_owner "$bin/pg_ctl" -D "$data" -l "$log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=200 $*" start >/dev/null \
    || { cat "$log" >&2; exit 1; }
}
# init_primary PORT: initdb in $dir/data, start it on PORT, create the gpuhub_test database.
init_primary() {
  [ -x "$bin/initdb" ] || { echo "pg-test-cluster: $bin/initdb missing (apt-get install postgresql-15)" >&2; exit 1; }
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$dir"; chmod 700 "$dir"; fi
  as_owner "$bin/initdb" -D "$dir/data" -U gpuhub --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  start_server "$dir/data" "$1" "$dir/server.log"
  echo "$1" > "$dir/primary.port"
  as_owner "$bin/createdb" -h 127.0.0.1 -p "$1" -U gpuhub gpuhub_test
}
psql_at() { as_owner /usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p "$1" -U gpuhub -d gpuhub_test -Atc "$2"; }
case "$cmd" in
  start)
    port=$(free_port)
    init_primary "$port"
    echo "postgresql://gpuhub@127.0.0.1:$port/gpuhub_test"
    ;;
  start-replicated)
    primary=$(free_port)
    init_primary "$primary"
    as_owner "$bin/pg_basebackup" -h 127.0.0.1 -p "$primary" -U gpuhub -D "$dir/replica" -X stream \
      --checkpoint=fast \
      >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log" >&2; exit 1; }
    as_owner touch "$dir/replica/standby.signal"
    echo "primary_conninfo = 'host=127.0.0.1 port=$primary user=gpuhub application_name=replica1'" \
      | as_owner tee -a "$dir/replica/postgresql.auto.conf" >/dev/null
    replica=$(free_port)
    start_server "$dir/replica" "$replica" "$dir/replica.log"
    # From now on every commit on the primary waits until the replica has flushed it
    # (synchronous_commit = on, the default). The replica does not have this setting (it was copied
    # before), so once promoted it does not wait for a standby of its own that it has not got.
    psql_at "$primary" "ALTER SYSTEM SET synchronous_standby_names = 'replica1'" >/dev/null
    psql_at "$primary" "SELECT pg_reload_conf()" >/dev/null
    for _ in $(seq 1 100); do
      [ "$(psql_at "$primary" "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'replica1'")" = sync ] && break
      sleep 0.1
    done
    [ "$(psql_at "$primary" "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'replica1'")" = sync ] \
      || { echo "pg-test-cluster: the replica does not stream in sync" >&2; cat "$dir/replica.log" >&2; exit 1; }
    echo "$replica" > "$dir/replica.port"
    echo "postgresql://gpuhub@127.0.0.1:$primary,127.0.0.1:$replica/gpuhub_test?target_session_attrs=read-write"
    ;;
  fail-over)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    as_owner "$bin/pg_ctl" -D "$dir/replica" -w -t 60 promote >/dev/null
    replica=$(cat "$dir/replica.port")
    for _ in $(seq 1 100); do
      [ "$(psql_at "$replica" "SELECT pg_is_in_recovery()")" = f ] && exit 0
      sleep 0.1
    done
    echo "pg-test-cluster: the replica was not promoted" >&2; exit 1
    ;;
  stop)
    for data in "$dir/data" "$dir/replica"; do
      if [ -d "$data" ]; then as_owner "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true; fi
    done
    rm -rf "$dir"
    ;;
  pause)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
    ;;
  resume)
    start_server "$dir/data" "$(cat "$dir/primary.port")" "$dir/server.log"
    ;;
  *) echo "usage: $0 start|start-replicated|fail-over|pause|resume|stop DIR" >&2; exit 2 ;;
esac
