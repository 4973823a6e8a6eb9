#!/usr/bin/env bash
# Runs every test against build dir $1 (already built): the GoogleTest suites through CTest (unit
# tests beside the code and tests/<area>/ integration suites), then each tests/<area>/run.sh script
# (end-to-end: real server processes, Chromium). A throwaway PostgreSQL 15 cluster is started for
# the run and its URL exported as GPUHUB_TEST_PG_URL, so every store test runs on both databases.
set -euo pipefail
build_dir=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

pg_dir=""
cleanup() { [ -n "$pg_dir" ] && bash scripts/pg-test-cluster.sh stop "$pg_dir" || true; }
trap cleanup EXIT
pg_dir=$(mktemp -d /tmp/gpuhub-pg.XXXXXX)
GPUHUB_TEST_PG_URL=$(bash scripts/pg-test-cluster.sh start "$pg_dir")
export GPUHUB_TEST_PG_URL
echo "test: PostgreSQL at $GPUHUB_TEST_PG_URL"

(cd "$build_dir" && ctest --output-on-failure -j "$(nproc)" --timeout 900)

for script in tests/*/run.sh; do
  [ -f "$script" ] || continue
  case "$script" in tests/fuzz/*) continue ;; esac
  echo "test: $script"
  bash "$script" "$build_dir"
done
