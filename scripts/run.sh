#!/usr/bin/env bash
# make run: starts `gpuhub serve` on an embedded SQLite database with the demo catalog and prints
# the URL. (Before the server existed this printed the guide and an example fit; it still does when
# the binary has no serve verb.)
set -euo pipefail
bin=${1:-build/gpuhub}
listen=${2:-127.0.0.1:8080}
db=${3:-sqlite:gpuhub.db}
if "$bin" serve --help >/dev/null 2>&1; then
  exec "$bin" serve --listen "$listen" --db "$db" --demo
fi
"$bin" guide
echo
echo "$ gpuhub fit --model 70b --workload infer --precision fp8"
"$bin" fit --model 70b --workload infer --precision fp8
