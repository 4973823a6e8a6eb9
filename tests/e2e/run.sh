#!/usr/bin/env bash
# Browser tests of the web pages: playwright-core drives Debian's Chromium (headless) against a
# real `gpuhub serve` on port 0 with a fresh database per test file. Screenshots of every page
# (phone and desktop) go to tests/out/e2e/.
# openapi.test.mjs checks docs/openapi.json against the same real server (no browser).
#   bash tests/e2e/run.sh BUILD_DIR [TEST_FILE...]
# Installs what is missing: Chromium and Node.js through scripts/install-deps.sh --with-test-tools,
# the npm packages with `npm ci` from the committed package-lock.json.
set -euo pipefail
build_dir=$(cd "${1:-build}" && pwd)
shift || true
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
[ -x "$build_dir/gpuhub" ] || { echo "e2e: $build_dir/gpuhub is not built"; exit 1; }

if [ ! -x /usr/bin/chromium ] || ! command -v npm >/dev/null 2>&1; then
  bash "$top/scripts/install-deps.sh" --with-test-tools
fi
cd "$here"
# npm ci again only when the lock file changed since the last install.
stamp=node_modules/.gpuhub-lock-stamp
if [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp"; then
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json "$stamp"
fi

export GPUHUB_BUILD_DIR="$build_dir"
export GPUHUB_E2E_OUT="$top/tests/out/e2e"
rm -rf "$GPUHUB_E2E_OUT"
mkdir -p "$GPUHUB_E2E_OUT"
if [ $# -gt 0 ]; then files=("$@"); else files=(./*.test.mjs); fi
node --test --test-concurrency=1 --test-reporter=spec "${files[@]}"
echo "e2e: screenshots in $GPUHUB_E2E_OUT"
