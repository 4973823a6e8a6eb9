#!/usr/bin/env bash
# gpuhub's HTTP API against the wire: for each hot endpoint, the same wrk run against
#   a) bench/http/baseline_server (a bare Boost.Beast keep-alive server answering a fixed body of
#      exactly the size gpuhub answers that endpoint with), and
#   b) a real `gpuhub serve --demo` (SQLite, synchronous=FULL, logging at info as in production),
# both on 127.0.0.1 with the same number of I/O threads, and prints gpuhub's req/s and p99 as
# ratios of the baseline's (req/s: higher is better; p99: lower is better).
#
#   bench/http/side_by_side.sh [BUILD_DIR] [DURATION_S] [CONNECTIONS] [ROUNDS]
# Each endpoint is measured ROUNDS times (default 3), baseline and gpuhub alternating, and the
# median of each is kept. Figures mean something only on a quiet machine: the script prints the
# load average before it starts (wrk and both servers share the machine's cores).
# ONLY=healthz,fit measures just those endpoints (healthz, fit, size, markets, book).
# BEFORE_BIN=path/to/an/older/gpuhub adds that binary as a third server in the same rounds (its
# ratios, and after/before), so a change is measured before and after in one run.
# Needs wrk (scripts/install-deps.sh --with-test-tools).
set -euo pipefail
build_dir=${1:-build}
duration=${2:-5}
connections=${3:-64}
rounds=${4:-3}
top=$(cd "$(dirname "$0")/../.." && pwd)
bin="$build_dir/gpuhub"
baseline="$build_dir/bench/http/baseline_server"
before_bin=${BEFORE_BIN:-}
for b in "$bin" "$baseline" $before_bin; do
  [ -x "$b" ] || { echo "side_by_side.sh: $b not built (cmake --build $build_dir)" >&2; exit 1; }
done
command -v wrk >/dev/null || { echo "side_by_side.sh: wrk is not installed" >&2; exit 1; }
io_threads=2
work=$(mktemp -d /tmp/gpuhub-sbs.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

wait_url() {  # FILE -> the URL printed on "listening on"
  for _ in $(seq 1 300); do
    if grep -q "listening on" "$1" 2>/dev/null; then grep -o 'http://[0-9.:]*' "$1" | head -1; return; fi
    sleep 0.1
  done
  echo "side_by_side.sh: no server came up ($1)" >&2; cat "$work"/*.log >&2 || true; exit 1
}

cat >"$work/config.toml" <<CONF
[server]
io_threads = $io_threads
# Every wrk connection comes from 127.0.0.1: no per-address cap here.
max_connections_per_address = 0
CONF
"$bin" serve --demo --listen 127.0.0.1:0 --db "sqlite:$work/sbs.db" --config "$work/config.toml" \
  >"$work/gpuhub.out" 2>"$work/gpuhub.log" &
pids+=($!)
gpuhub=$(wait_url "$work/gpuhub.out")
before=""
if [ -n "$before_bin" ]; then
  "$before_bin" serve --demo --listen 127.0.0.1:0 --db "sqlite:$work/before.db" \
    --config "$work/config.toml" >"$work/before.out" 2>"$work/before.log" &
  pids+=($!)
  before=$(wait_url "$work/before.out")
fi

# name | method | path | body
endpoints=(
  "healthz|GET|/healthz|"
  "fit 70b fp8|POST|/v1/fit|{\"model\":\"70b\",\"workload\":\"infer\",\"precision\":\"fp8\",\"context\":8192}"
  "size 70b fp8|POST|/v1/size|{\"model\":\"70b\",\"workload\":\"infer\",\"precision\":\"fp8\",\"context\":8192}"
  "markets|GET|/v1/markets|"
  "book H100 SXM|GET|/v1/markets/h100-sxm/book|"
)
if [ -n "${ONLY:-}" ]; then  # ONLY=healthz,fit: just those endpoints (the first word of the name)
  kept=()
  for e in "${endpoints[@]}"; do n=${e%%|*}; [[ ",$ONLY," == *",${n%% *},"* ]] && kept+=("$e"); done
  endpoints=("${kept[@]}")
fi

# The bytes gpuhub answers each endpoint with: the baseline answers the same number.
body_args=()
for e in "${endpoints[@]}"; do
  IFS='|' read -r name method path body <<<"$e"
  if [ "$method" = POST ]; then
    got=$(curl -s -o "$work/answer" -w '%{http_code} %{size_download}' -X POST \
      -H 'Content-Type: application/json' -d "$body" "$gpuhub$path")
  else
    got=$(curl -s -o "$work/answer" -w '%{http_code} %{size_download}' "$gpuhub$path")
  fi
  code=${got% *}; size=${got#* }
  [ "$code" = 200 ] || { echo "side_by_side.sh: $method $path answered $code" >&2; cat "$work/answer" >&2; exit 1; }
  body_args+=(--body "$path=$size")
done
"$baseline" --threads "$io_threads" "${body_args[@]}" >"$work/baseline.out" 2>"$work/baseline.log" &
pids+=($!)
base=$(wait_url "$work/baseline.out")

run_wrk() {  # URL METHOD BODY -> "req_per_s p99_ms"
  local url=$1 method=$2 body=$3 line
  if [ "$method" = POST ]; then
    line=$(WRK_BODY="$body" wrk -t2 -c"$connections" -d"${duration}s" -s "$top/bench/http/post.lua" "$url" | grep RESULT)
  else
    line=$(wrk -t2 -c"$connections" -d"${duration}s" -s "$top/bench/http/get.lua" "$url" | grep RESULT)
  fi
  local rps p99 errors
  rps=$(sed -n 's/.*req_per_s=\([0-9]*\).*/\1/p' <<<"$line")
  p99=$(sed -n 's/.*p99_ms=\([0-9.]*\).*/\1/p' <<<"$line")
  errors=$(sed -n 's/.*errors=\([0-9]*\).*/\1/p' <<<"$line")
  [ "$errors" = 0 ] || echo "side_by_side.sh: $errors errors against $url" >&2
  echo "$rps $p99"
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "side by side: $connections connections, ${duration}s x $rounds rounds, wrk -t2, io_threads=$io_threads"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
printf '%-16s %7s | %10s %8s | %10s %8s | %7s %7s\n' endpoint bytes base_rps base_p99 gpuhub_rps gh_p99 rps_x p99_x
for e in "${endpoints[@]}"; do
  IFS='|' read -r name method path body <<<"$e"
  size=$(printf '%s\n' "${body_args[@]}" | grep "^$path=" | cut -d= -f2)
  : >"$work/b" ; : >"$work/g"; : >"$work/o"
  for _ in $(seq 1 "$rounds"); do
    run_wrk "$base$path" "$method" "$body" >>"$work/b"
    run_wrk "$gpuhub$path" "$method" "$body" >>"$work/g"
    if [ -n "$before" ]; then run_wrk "$before$path" "$method" "$body" >>"$work/o"; fi
  done
  b_rps=$(cut -d' ' -f1 "$work/b" | median); b_p99=$(cut -d' ' -f2 "$work/b" | median)
  g_rps=$(cut -d' ' -f1 "$work/g" | median); g_p99=$(cut -d' ' -f2 "$work/g" | median)
  awk -v n="$name" -v s="$size" -v br="$b_rps" -v bp="$b_p99" -v gr="$g_rps" -v gp="$g_p99" \
    'BEGIN { printf "%-16s %7s | %10s %8s | %10s %8s | %6.2fx %6.2fx\n", n, s, br, bp, gr, gp, gr / br, gp / bp }'
  if [ -n "$before" ]; then
    o_rps=$(cut -d' ' -f1 "$work/o" | median); o_p99=$(cut -d' ' -f2 "$work/o" | median)
    awk -v n="  before" -v br="$b_rps" -v bp="$b_p99" -v gr="$o_rps" -v gp="$o_p99" -v ar="$g_rps" \
      'BEGIN { printf "%-16s %7s | %10s %8s | %10s %8s | %6.2fx %6.2fx | after/before req/s %.2fx\n", n, "", "", "", gr, gp, gr / br, gp / bp, ar / gr }'
  fi
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
