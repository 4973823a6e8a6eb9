#!/usr/bin/env bash
# make run: starts `gpuhub serve` on an embedded SQLite database with the demo catalog and FX rates,
# and prints the URL. Stop it with Ctrl-C (graceful: in-flight requests finish and commit).
#
# Webhooks need a shared secret. Unless GPUHUB_WEBHOOK_SECRET is set, a demo secret is used and
# printed, so that a signed test webhook can be sent by hand (see docs/api.md).
set -euo pipefail
bin=${1:-build/gpuhub}
listen=${2:-127.0.0.1:8080}
db=${3:-sqlite:gpuhub.db}
if ! "$bin" serve --help >/dev/null 2>&1; then
  "$bin" guide
  exit 0
fi
if [ -z "${GPUHUB_WEBHOOK_SECRET:-}" ]; then
  export GPUHUB_WEBHOOK_SECRET=demo-webhook-secret-0123456789abcdef
  echo "run: demo webhook secret: $GPUHUB_WEBHOOK_SECRET (set GPUHUB_WEBHOOK_SECRET to choose your own)"
fi
echo "run: gpuhub serve --listen $listen --db $db --demo   (API reference: docs/api.md)"
exec "$bin" serve --listen "$listen" --db "$db" --demo
