#!/usr/bin/env bash
# stalled-senders.sh ingest|rsocket [REV] [N]: what N connections that
# declare a large message and then send almost nothing cost a daemon. The
# numbers docs/reliability.md gives for the agent's ingest and for RSocket
# frames come from here.
#
#   ingest:  `sluice agent`; each connection sends a POST /v1/records with
#            Content-Length: 64 MiB and 3 bytes of body.
#   rsocket: `sluice rsocket serve`; each connection sends a frame length
#            prefix of 16 MiB and 10 bytes of the frame.
#
# Prints the daemon's go_memstats_heap_inuse_bytes and VmRSS before and
# 2 s after the N connections (default 40), built from the working tree and,
# with REV, from that git revision too (before/after a change):
#
#   scripts/stalled-senders.sh ingest 7052fc3
#   scripts/stalled-senders.sh rsocket 7052fc3
#
# Loopback only, ports 27601-27603; the connections are held for 2 s, then
# everything is stopped.
set -euo pipefail
mode=${1:?usage: scripts/stalled-senders.sh ingest|rsocket [REV] [N]}
rev=${2:-} n=${3:-40}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
# shellcheck source=lib/hostile.sh
. "$root/scripts/lib/hostile.sh"
build_bins "$root" "$work" "$rev"

heap() { curl -s "http://127.0.0.1:27602/metrics" | awk '$1 == "go_memstats_heap_inuse_bytes" { printf "%.0f MB", $2 / 1e6 }'; }
rss() { awk '/^VmRSS/ { printf "%.0f MB", $2 / 1024 }' "/proc/$1/status"; }

for v in "${bins[@]}"; do
  case $mode in
  ingest)
    "$work/sluice-$v" agent --sink 127.0.0.1:1 --spool "$work/spool-$v" --ingest 127.0.0.1:27601 \
      --metrics 127.0.0.1:27602 >"$work/$v.log" 2>&1 &
    ;;
  rsocket)
    "$work/sluice-$v" rsocket serve --listen tcp://127.0.0.1:27601 --metrics 127.0.0.1:27602 >"$work/$v.log" 2>&1 &
    ;;
  *)
    echo "mode must be ingest or rsocket" >&2
    exit 2
    ;;
  esac
  pid=$!
  for _ in $(seq 100); do curl -sf http://127.0.0.1:27602/metrics >/dev/null && break || sleep 0.1; done
  echo "== $v ($([ "$v" = old ] && echo "$rev" || echo "working tree")), $mode"
  echo "before:          heap in use $(heap), RSS $(rss $pid)"
  fds=()
  for _ in $(seq "$n"); do
    exec {fd}<>/dev/tcp/127.0.0.1/27601
    if [ "$mode" = ingest ]; then
      printf 'POST /v1/records HTTP/1.1\r\nHost: x\r\nContent-Length: 67108864\r\n\r\nabc' >&"$fd"
    else
      printf '\xff\xff\xff\0\0\0\0\0\0\0\0\0\0' >&"$fd"
    fi
    fds+=("$fd")
  done
  sleep 2
  echo "$n connections: heap in use $(heap), RSS $(rss $pid)"
  for fd in "${fds[@]}"; do exec {fd}>&-; done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
