#!/usr/bin/env bash
# Installs rsocket-js 1.0.0-alpha.3 (pinned exactly in package.json and
# package-lock.json; npm "latest" is the old 0.0.27) with `npm ci` into a
# cache dir, for the interop test rsocket/interop_js_test.go, which runs
# client.js and server.js from here with NODE_PATH=<cache>/node_modules.
# Idempotent: does nothing when the cache was installed from this lockfile.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${SLUICE_RSOCKET_JS_DIR:-$HOME/.cache/sluice/rsocket-js}"
command -v node >/dev/null || { echo "node is not installed (Node 20 is expected)" >&2; exit 1; }
sum="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$sum" ] && [ -d "$dir/node_modules/rsocket-core" ]; then
  echo "rsocket-js already in $dir"
  exit 0
fi
mkdir -p "$dir"
rm -f "$dir/.installed"
cp "$here/package.json" "$here/package-lock.json" "$dir/"
(cd "$dir" && timeout 300 npm ci --no-audit --no-fund --ignore-scripts)
NODE_PATH="$dir/node_modules" node -e '
const v = require("rsocket-core/package.json").version;
if (v !== "1.0.0-alpha.3") { console.error("rsocket-core " + v + " installed, want 1.0.0-alpha.3"); process.exit(1); }
require("rsocket-tcp-client"); require("rsocket-tcp-server");
require("rsocket-websocket-client"); require("rsocket-websocket-server"); require("ws");'
echo "$sum" > "$dir/.installed"
echo "rsocket-js 1.0.0-alpha.3 installed in $dir"
