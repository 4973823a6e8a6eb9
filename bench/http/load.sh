#!/usr/bin/env bash
# HTTP load run with wrk on loopback against a real `gpuhub serve` (SQLite, synchronous=FULL):
#   1. POST /v1/fit (the public read API: pure computation)
#   2. POST /v1/conversions (an authenticated write: a two-leg ledger batch, group-committed)
# Prints requests/s and p50/p99 latency for each.
#   bench/http/load.sh [BUILD_DIR] [DURATION_S] [CONNECTIONS] [--db URL]
# Needs wrk (scripts/install-deps.sh --with-test-tools). Everything stays on 127.0.0.1.
set -euo pipefail
build_dir=${1:-build}
duration=${2:-10}
connections=${3:-64}
db=""
if [ "${4:-}" = "--db" ]; then db=${5:?}; fi
top=$(cd "$(dirname "$0")/../.." && pwd)
bin="$build_dir/gpuhub"
[ -x "$bin" ] || { echo "load.sh: $bin not built" >&2; exit 1; }
command -v wrk >/dev/null || { echo "load.sh: wrk is not installed (scripts/install-deps.sh --with-test-tools)" >&2; exit 1; }
work=$(mktemp -d /tmp/gpuhub-load.XXXXXX)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "$db" ] || db="sqlite:$work/load.db"
cat >"$work/config.toml" <<CONF
[server]
io_threads = 2
# Every wrk connection comes from 127.0.0.1: no per-address cap here.
max_connections_per_address = 0
[auth]
# Logins are not what is measured here; keep hashing cheap and limits out of the way.
argon2_ops_limit = 1
argon2_mem_limit_bytes = 8192
login_attempts_per_address = 1000000
signups_per_address = 1000000
CONF
printf 'load admin password\n' | "$bin" admin create-user --username loadadmin --role admin --db "$db" --config "$work/config.toml" >/dev/null
GPUHUB_LOG_LEVEL=warn "$bin" serve --listen 127.0.0.1:0 --db "$db" --config "$work/config.toml" >"$work/stdout" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 1 100); do grep -q "listening on" "$work/stdout" 2>/dev/null && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*' "$work/stdout")
[ -n "$url" ] || { cat "$work/server.log" >&2; exit 1; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
post() { curl -sf -X POST "$url$1" -H 'Content-Type: application/json' ${3:+-H "Authorization: Bearer $3"} -d "$2"; }
admin=$(post /v1/sessions '{"username":"loadadmin","password":"load admin password"}' | json '["token"]')
post /v1/accounts '{"username":"loaduser","password":"load user password"}' >/dev/null
user=$(post /v1/sessions '{"username":"loaduser","password":"load user password"}' | json '["token"]')
curl -sf -X PUT "$url/v1/admin/fx-rates/EUR/USD" -H 'Content-Type: application/json' \
  -H "Authorization: Bearer $admin" -d '{"rate":"1.08","spread_bps":25}' >/dev/null
post /v1/admin/credits '{"username":"loaduser","amount":"1000000","currency":"USD","reason":"load test"}' "$admin" >/dev/null

echo "gpuhub load: $connections connections, ${duration}s each, 2 wrk threads, $db"
fit_body='{"model":"70b","workload":"infer","precision":"fp8","context":8192}'
fit=$(WRK_BODY="$fit_body" wrk -t2 -c"$connections" -d"${duration}s" -s "$top/bench/http/post.lua" "$url/v1/fit" | grep RESULT)
echo "POST /v1/fit          $fit"
write=$(WRK_BODY='{"from":"USD","to":"EUR","amount":"0.01"}' WRK_TOKEN="$user" \
  wrk -t2 -c"$connections" -d"${duration}s" -s "$top/bench/http/post.lua" "$url/v1/conversions" | grep RESULT)
echo "POST /v1/conversions  $write"
# The books still balance after the run.
curl -sf "$url/v1/admin/ledger" -H "Authorization: Bearer $admin" | json '["invariants"]' | sed 's/^/ledger invariants after load: /'
