#!/usr/bin/env bash
# The static checks CI runs (.ci/run), for anyone:
#   - gofmt -l on every tracked Go file, failing on any it would change;
#   - staticcheck ./... with its default checks, failing on any finding;
#   - deadcode -test ./..., failing on any function that neither the
#     commands nor the tests reach (a public option nobody exercises is
#     one: give it a test, or remove it).
# Installs both tools, pinned, itself (into ~/.cache/sluice/bin, once per
# version), so it works on a fresh machine with an empty module cache.
#
# A staticcheck finding that is right to keep gets a
# `//lint:ignore CHECK reason` line at the spot, saying why (see
# internal/xfer/diskstore/upload.go), never a disabled check.
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2 # honnef.co/go/tools; v0.8 is the line that knows Go 1.26
XTOOLS_VERSION=v0.52.0     # golang.org/x/tools, for cmd/deadcode

cache="${XDG_CACHE_HOME:-$HOME/.cache}/sluice/bin"

# tool NAME PACKAGE VERSION: the path of the installed binary.
tool() {
  local dir="$cache/$1-$3"
  if [ ! -x "$dir/$1" ]; then
    echo "== installing $2@$3 into $dir" >&2
    mkdir -p "$dir"
    GOBIN="$dir" go install "$2@$3" >&2
  fi
  echo "$dir/$1"
}

staticcheck=$(tool staticcheck honnef.co/go/tools/cmd/staticcheck "$STATICCHECK_VERSION")
deadcode=$(tool deadcode golang.org/x/tools/cmd/deadcode "$XTOOLS_VERSION")

echo "== gofmt -l"
unformatted=$(git ls-files -z '*.go' | xargs -0 gofmt -l)
if [ -n "$unformatted" ]; then
  echo "not gofmt-formatted (run gofmt -w on them):"
  echo "$unformatted"
  exit 1
fi
echo "gofmt: all formatted"

echo "== staticcheck $STATICCHECK_VERSION ./..."
"$staticcheck" ./...
echo "staticcheck: no findings"

echo "== deadcode -test ./... (golang.org/x/tools $XTOOLS_VERSION)"
dead=$("$deadcode" -test ./...)
if [ -n "$dead" ]; then
  echo "$dead"
  echo "deadcode: the functions above are reached by neither the commands nor the tests: test them or remove them" >&2
  exit 1
fi
echo "deadcode: no findings"
