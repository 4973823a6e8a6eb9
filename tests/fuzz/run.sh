#!/usr/bin/env bash
# Runs every fuzz target in build dir $1 for FUZZ_SECONDS (default 20) each, from its seed corpus
# tests/fuzz/corpus/<target>/ (copied, so runs never grow the committed corpus).
set -euo pipefail
build_dir=${1:-build-fuzz}
seconds=${FUZZ_SECONDS:-20}
here=$(cd "$(dirname "$0")" && pwd)
found=0
for bin in "$build_dir"/tests/fuzz/*_fuzz; do
  [ -x "$bin" ] || continue
  found=1
  name=$(basename "$bin")
  work=$(mktemp -d)
  [ -d "$here/corpus/$name" ] && cp -r "$here/corpus/$name/." "$work/"
  echo "fuzz: $name for ${seconds}s"
  (cd "$work" && "$OLDPWD/$bin" -max_total_time="$seconds" -max_len=65536 -print_final_stats=0 \
      -error_exitcode=77 "$work" >"$work.log" 2>&1) || { tail -50 "$work.log"; echo "fuzz: $name FAILED"; exit 1; }
  grep -E "^#[0-9]+.*DONE" "$work.log" | tail -1 || true
  rm -rf "$work" "$work.log"
done
[ $found -eq 1 ] || echo "fuzz: no targets built"
