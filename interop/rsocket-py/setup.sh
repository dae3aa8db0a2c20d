#!/usr/bin/env bash
# Installs rsocket-py (pinned in requirements.txt) into a venv in the cache
# dir, for the interop test rsocket/interop_py_test.go. Idempotent: does
# nothing when the venv already has the pinned version.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${SLUICE_RSOCKET_PY_VENV:-$HOME/.cache/sluice/rsocket-py}"
want="$(grep -E '^rsocket==' "$here/requirements.txt" | cut -d= -f3)"
if [ -x "$venv/bin/python" ] && [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("rsocket"))' 2>/dev/null)" = "$want" ]; then
  echo "rsocket-py $want already in $venv"
  exit 0
fi
python3 -m venv "$venv"
timeout 300 "$venv/bin/pip" install --disable-pip-version-check --no-input --timeout 60 -r "$here/requirements.txt"
"$venv/bin/python" -c 'import rsocket.rsocket_client' 
echo "rsocket-py $want installed in $venv"
