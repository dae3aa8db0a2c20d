#!/usr/bin/env bash
# install-prometheus.sh: installs Debian's prometheus (2.42.0 on bookworm)
# for the tests that run a real Prometheus on loopback (issue 28): the
# agent's remote-write receiver (internal/agent/collect
# TestPrometheusRemoteWrite) and the sink's remote-write exporter, which
# writes into one started with --web.enable-remote-write-receiver
# (cmd/sluice TestExportRemoteWriteToPrometheus). They skip without it, or
# fail with SLUICE_PROMETHEUS=require. The package's own service is
# stopped and disabled: the tests run their own instances in temporary
# directories.
set -euo pipefail
if command -v prometheus >/dev/null; then
  echo "prometheus already installed: $(prometheus --version 2>&1 | head -1)"
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "install-prometheus.sh: no apt-get here; install prometheus (2.x) with your package manager" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
$sudo apt-get update
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends prometheus
# Debian starts a system-wide instance on 9090 (and node exporter); the test needs neither.
if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
  $sudo systemctl disable --now prometheus prometheus-node-exporter 2>/dev/null || true
fi
prometheus --version 2>&1 | head -1
