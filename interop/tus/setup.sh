#!/usr/bin/env bash
# Installs the real tus clients the xfer interop tests drive, pinned:
# tuspy 1.1.0 (requirements.txt, with its dependencies) into a venv and
# tus-js-client 4.3.1 (package-lock.json, `npm ci`) into node_modules, both
# under ~/.cache/sluice/tus (SLUICE_TUS_DIR). Idempotent and bounded in time.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${SLUICE_TUS_DIR:-$HOME/.cache/sluice/tus}"
mkdir -p "$dest"

# tuspy
venv="$dest/venv"
want="$(grep -E '^tuspy==' "$here/requirements.txt" | cut -d= -f3)"
if [ -x "$venv/bin/python" ] && [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("tuspy"))' 2>/dev/null)" = "$want" ]; then
  echo "tuspy $want already in $venv"
else
  python3 -m venv "$venv"
  timeout 300 "$venv/bin/pip" install --disable-pip-version-check --no-input --timeout 60 -r "$here/requirements.txt"
  "$venv/bin/python" -c 'import tusclient.client'
  echo "tuspy $want installed in $venv"
fi

# tus-js-client: npm ci in a copy of package.json and the lock file.
node_dir="$dest/node"
mkdir -p "$node_dir"
if cmp -s "$here/package-lock.json" "$node_dir/package-lock.json" && [ -d "$node_dir/node_modules/tus-js-client" ]; then
  echo "tus-js-client already in $node_dir"
else
  cp "$here/package.json" "$here/package-lock.json" "$node_dir/"
  (cd "$node_dir" && timeout 300 npm ci --no-audit --no-fund)
  echo "tus-js-client $(node -p "require('$node_dir/node_modules/tus-js-client/package.json').version") installed in $node_dir"
fi
