#!/usr/bin/env bash
# Start-up time and memory of `gpuhub serve` against the size of the market's history:
#   bench/history/startup.sh [BUILD_DIR] [ORDERS...]      (default: 0 100000)
# For each size: a fresh SQLite database filled by build/bench/history/history_gen (ORDERS closed
# bids, ORDERS/9 trades and ended leases, their ledger transfers), then `gpuhub serve` on it: the
# seconds from exec to "listening on", and the resident memory (VmRSS) and its peak (VmHWM) once
# it listens. GPUHUB_BENCH_PG_URL=postgresql://... (a scratch database: tables are created if
# missing, nothing is truncated) measures PostgreSQL instead, one size per run. The last columns are
# the load times of the domains that hold history (the server's event=domain_loaded log lines).
# HISTORY_GEN_FLAGS=--invoiced: the history is last month's, on its issued statements (a line per
# lease), as after a month end.
set -euo pipefail
build_dir=${1:-build}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(0 100000)
bin="$build_dir/gpuhub"
gen="$build_dir/bench/history/history_gen"
for b in "$bin" "$gen"; do
  [ -x "$b" ] || { echo "startup.sh: $b not built (cmake --build $build_dir)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/gpuhub-startup.XXXXXX)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
printf '%10s %10s %12s %10s %10s %10s %11s %10s %11s\n' orders db_MiB startup_s rss_MiB peak_MiB gen_s \
  wallets_ms market_ms billing_ms
for n in "${sizes[@]}"; do
  if [ -n "${GPUHUB_BENCH_PG_URL:-}" ]; then
    db=$GPUHUB_BENCH_PG_URL
  else
    db="sqlite:$work/h$n.db"
  fi
  gen_s=0
  if [ "$n" -gt 0 ]; then
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$gen" --db "$db" --orders "$n" ${HISTORY_GEN_FLAGS:-} >"$work/gen.out" 2>"$work/gen.err" || { cat "$work/gen.err" >&2; exit 1; }
    gen_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  fi
  db_mib=0
  [ -f "$work/h$n.db" ] && db_mib=$(du -m "$work/h$n.db" | cut -f1)
  # The previous size's "listening on" must not be what the wait below finds.
  rm -f "$work/out"
  t0=$(date +%s.%N)
  GPUHUB_LOG_LEVEL=info "$bin" serve --listen 127.0.0.1:0 --db "$db" >"$work/out" 2>"$work/log" &
  server=$!
  for _ in $(seq 1 6000); do
    grep -q "listening on" "$work/out" 2>/dev/null && break
    kill -0 "$server" 2>/dev/null || { cat "$work/log" >&2; exit 1; }
    sleep 0.01
  done
  startup=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  rss=$(awk '/^VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$server/status")
  peak=$(awk '/^VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$server/status")
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
  loaded() { grep -o "event=domain_loaded domain=$1 ms=[0-9.]*" "$work/out" "$work/log" 2>/dev/null |
    head -1 | sed 's/.*ms=//'; }
  printf '%10s %10s %12s %10s %10s %10s %11s %10s %11s\n' "$n" "$db_mib" "$startup" "$rss" "$peak" \
    "$gen_s" "$(loaded wallets)" "$(loaded market)" "$(loaded billing)"
done
