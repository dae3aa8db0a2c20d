#!/usr/bin/env bash
# The static checks CI runs (.ci/run), for anyone: staticcheck ./... with its
# default checks, failing on any finding. Installs the pinned staticcheck
# itself (into ~/.cache/sluice/bin, once per version), so it works on a fresh
# machine with an empty module cache.
#
# A finding that is right to keep gets a `//lint:ignore CHECK reason` line at
# the spot, saying why (see internal/xfer/upload.go), never a disabled check.
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2 # honnef.co/go/tools; v0.8 is the line that knows Go 1.26

bin="${XDG_CACHE_HOME:-$HOME/.cache}/sluice/bin/staticcheck-$STATICCHECK_VERSION"
if [ ! -x "$bin/staticcheck" ]; then
  echo "== installing staticcheck $STATICCHECK_VERSION into $bin"
  mkdir -p "$bin"
  GOBIN="$bin" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi

echo "== staticcheck $STATICCHECK_VERSION ./..."
"$bin/staticcheck" ./...
echo "staticcheck: no findings"
