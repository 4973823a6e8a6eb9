#!/usr/bin/env bash
# Runs every Google Benchmark program built in $1 (bench/<component>/*_bench) and keeps the results
# as JSON in $1/bench-results/ for the notes.
set -euo pipefail
build_dir=${1:-build}
out="$build_dir/bench-results"
mkdir -p "$out"
for bin in "$build_dir"/bench/*/*_bench; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  echo "== $name"
  "$bin" --benchmark_out="$out/$name.json" --benchmark_out_format=json ${BENCH_ARGS:-}
done
