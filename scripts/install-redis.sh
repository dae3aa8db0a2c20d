#!/usr/bin/env bash
# install-redis.sh: installs Debian's redis-server (7.0.15 on bookworm) for
# `sluice bench rr --protocols redis,redis-pipelined`, which starts it
# itself on loopback and skips those rows when it is absent. The package's
# own service is stopped and disabled: the bench runs its own instance
# with nothing on disk.
set -euo pipefail
if command -v redis-server >/dev/null; then
  echo "redis-server already installed: $(redis-server --version)"
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "install-redis.sh: no apt-get here; install redis-server (7.x) with your package manager" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
$sudo apt-get update
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends redis-server
# Debian starts a system-wide instance on 6379; the bench needs none.
if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
  $sudo systemctl disable --now redis-server || true
fi
redis-server --version
