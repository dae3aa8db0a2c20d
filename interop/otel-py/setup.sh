#!/usr/bin/env bash
# Installs the OpenTelemetry Python SDK and its OTLP exporters (pinned in
# requirements.txt) into a venv in the cache dir, for the OTLP test of the
# agent (internal/agent/collect TestOTelSDK). Idempotent: does nothing
# when the venv already has the pinned version.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${SLUICE_OTEL_PY_VENV:-$HOME/.cache/sluice/otel-py}"
want="$(grep -E '^opentelemetry-exporter-otlp==' "$here/requirements.txt" | cut -d= -f3)"
if [ -x "$venv/bin/python" ] && [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("opentelemetry-exporter-otlp"))' 2>/dev/null)" = "$want" ]; then
  echo "opentelemetry-exporter-otlp $want already in $venv"
  exit 0
fi
python3 -m venv "$venv"
timeout 300 "$venv/bin/pip" install --disable-pip-version-check --no-input --timeout 60 -r "$here/requirements.txt"
"$venv/bin/python" -c 'import opentelemetry.exporter.otlp.proto.http.metric_exporter, opentelemetry.exporter.otlp.proto.grpc.trace_exporter'
echo "opentelemetry-exporter-otlp $want installed in $venv"
