#!/usr/bin/env bash
# Instructions per request, counted by callgrind: repeatable on a loaded machine where wall-clock
# figures are not. Runs `gpuhub serve --demo` (SQLite) and bench/http/baseline_server (answering
# the same number of bytes per endpoint) under valgrind --tool=callgrind, sends exactly REQUESTS
# keep-alive requests per endpoint (after a warm-up that is not counted) and prints the server's
# instructions per request for each, and gpuhub's as a multiple of the baseline's. The dumps stay
# in OUT_DIR for callgrind_annotate (one file per endpoint and server).
#
#   bench/http/profile.sh [BUILD_DIR] [REQUESTS] [OUT_DIR]
# Instruction counts include everything the process does while the requests run (other threads
# too: the engine's writer, the log flusher).
set -euo pipefail
build_dir=${1:-build}
requests=${2:-2000}
out=${3:-$build_dir/profile}
top=$(cd "$(dirname "$0")/../.." && pwd)
bin="$build_dir/gpuhub"
baseline="$build_dir/bench/http/baseline_server"
for b in "$bin" "$baseline"; do
  [ -x "$b" ] || { echo "profile.sh: $b not built" >&2; exit 1; }
done
command -v valgrind >/dev/null || { echo "profile.sh: valgrind is not installed (scripts/install-deps.sh --with-test-tools)" >&2; exit 1; }
mkdir -p "$out"
rm -f "$out"/*.callgrind
work=$(mktemp -d /tmp/gpuhub-profile.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
wait_url() {
  for _ in $(seq 1 1200); do
    if grep -q "listening on" "$1" 2>/dev/null; then grep -o 'http://[0-9.:]*' "$1" | head -1; return; fi
    sleep 0.1
  done
  echo "profile.sh: no server came up ($1)" >&2; cat "$work"/*.log >&2 || true; exit 1
}
cat >"$work/config.toml" <<CONF
[server]
io_threads = 2
max_connections_per_address = 0
CONF

endpoints=(
  "healthz|GET|/healthz|"
  "fit|POST|/v1/fit|{\"model\":\"70b\",\"workload\":\"infer\",\"precision\":\"fp8\",\"context\":8192}"
  "size|POST|/v1/size|{\"model\":\"70b\",\"workload\":\"infer\",\"precision\":\"fp8\",\"context\":8192}"
  "markets|GET|/v1/markets|"
  "book|GET|/v1/markets/h100-sxm/book|"
)
if [ -n "${PROFILE_ONLY:-}" ]; then
  kept=()
  for e in "${endpoints[@]}"; do [[ ",$PROFILE_ONLY," == *",${e%%|*},"* ]] && kept+=("$e"); done
  endpoints=("${kept[@]}")
fi

# $1 = name prefix, $2 = URL, $3 = pid: one dump per endpoint, prints "name instructions".
measure() {
  local prefix=$1 url=$2 pid=$3
  for e in "${endpoints[@]}"; do
    IFS='|' read -r name method path body <<<"$e"
    python3 "$top/bench/http/drive.py" "$url$path" "$method" 200 4 ${body:+"$body"}
    callgrind_control -i on "$pid" >/dev/null
    python3 "$top/bench/http/drive.py" "$url$path" "$method" "$requests" 4 ${body:+"$body"}
    callgrind_control -i off "$pid" >/dev/null
    callgrind_control -d "$prefix-$name" "$pid" >/dev/null
    local dump
    dump=$(ls -t "$work"/"$prefix".out.* | head -1)
    mv "$dump" "$out/$prefix-$name.callgrind"
    local total
    total=$(grep -m1 '^totals:' "$out/$prefix-$name.callgrind" | awk '{print $2}')
    [ -n "$total" ] || total=$(grep -m1 '^summary:' "$out/$prefix-$name.callgrind" | awk '{print $2}')
    echo "$name $total"
  done
}

valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/gpuhub.out.%p" \
  "$bin" serve --demo --listen 127.0.0.1:0 --db "sqlite:$work/p.db" --config "$work/config.toml" \
  >"$work/gpuhub.stdout" 2>"$work/gpuhub.log" &
gpid=$!; pids+=($gpid)
gurl=$(wait_url "$work/gpuhub.stdout")
body_args=()
for e in "${endpoints[@]}"; do
  IFS='|' read -r name method path body <<<"$e"
  if [ "$method" = POST ]; then
    size=$(curl -s -o /dev/null -w '%{size_download}' -X POST -H 'Content-Type: application/json' -d "$body" "$gurl$path")
  else
    size=$(curl -s -o /dev/null -w '%{size_download}' "$gurl$path")
  fi
  body_args+=(--body "$path=$size")
done
measure gpuhub "$gurl" "$gpid" >"$work/g"
kill "$gpid"; wait "$gpid" 2>/dev/null || true

valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/baseline.out.%p" \
  "$baseline" --threads 2 "${body_args[@]}" >"$work/baseline.stdout" 2>"$work/baseline.log" &
bpid=$!; pids+=($bpid)
burl=$(wait_url "$work/baseline.stdout")
measure baseline "$burl" "$bpid" >"$work/b"

echo "instructions per request (callgrind, $requests requests per endpoint, 4 keep-alive connections)"
printf '%-10s %8s %14s %14s %8s\n' endpoint bytes baseline gpuhub ratio
i=0
for e in "${endpoints[@]}"; do
  IFS='|' read -r name method path body <<<"$e"
  b=$(awk -v n="$name" '$1==n {print $2}' "$work/b")
  g=$(awk -v n="$name" '$1==n {print $2}' "$work/g")
  size=${body_args[$((i * 2 + 1))]#*=}
  awk -v n="$name" -v s="$size" -v b="$b" -v g="$g" -v r="$requests" \
    'BEGIN { printf "%-10s %8s %14.0f %14.0f %7.2fx\n", n, s, b / r, g / r, g / b }'
  i=$((i + 1))
done
echo "dumps: $out/*.callgrind (callgrind_annotate --inclusive=yes FILE | head -60)"
