#!/usr/bin/env bash
# Runs every test: installs the parts the README's `go test -count=1 ./...`
# skips without (Kafka, the RSocket interop peers, the tus clients,
# Chromium; scripts/test-parts.sh, as CI does), makes a missing one fail
# instead of skip, then runs the README's command. The real disk-full
# tests mount a tmpfs and need root: run this as root for those too.
#
#   scripts/test-all.sh [go test flags]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/test-parts.sh
if [ "$(id -u)" != 0 ]; then
  echo "== not root: the real disk-full tests (tmpfs) will skip; run as root to include them" >&2
fi
echo "== go test -count=1 $* ./..."
exec go test -count=1 "$@" ./...
