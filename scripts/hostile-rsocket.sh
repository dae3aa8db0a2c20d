#!/usr/bin/env bash
# hostile-rsocket.sh [REV]: what hostile RSocket clients cost a server.
# The numbers of docs/rsocket.md's hostile-client table come from here.
#
# For each misbehaviour of `sluice rsocket hostile` (silent, half-frame,
# never-reads, keepalive-flood, request-flood, fnf-flood, huge-length), it
# starts a fresh `sluice rsocket serve` (the echo responder), records its
# VmRSS and go_memstats_heap_inuse_bytes, lets CONNS hostile connections
# (default 100) misbehave with FRAME-sized frames (default 1MiB) for
# DURATION (default 35s: past the server's frame stall timeout, 30 s, so
# that its closes show), samples RSS and heap every 0.25 s meanwhile,
# and has a well-behaved client (`sluice rsocket rr`) ask 5 times, 1 s
# apart, each bounded to 5 s. It prints a markdown table: before, peak,
# how many hostile connections the server closed, and the well-behaved
# client's answers. The server is built from the working tree and, with
# REV, from that git revision too (before/after); the attacker is always
# the working tree's (an old revision may not have `rsocket hostile`).
#
#   scripts/hostile-rsocket.sh
#   scripts/hostile-rsocket.sh be823c2
#   CONNS=20 DURATION=5s MODES="silent half-frame" scripts/hostile-rsocket.sh
#   SCHEME=ws scripts/hostile-rsocket.sh     # over WebSocket
#   SERVE_FLAGS="--setup-timeout 2s --frame-stall-timeout 2s" DURATION=5s scripts/hostile-rsocket.sh
#       (SERVE_FLAGS go to every build's server: an old REV may not know them)
#   GOMEMLIMIT=600MiB scripts/hostile-rsocket.sh   # the Go runtime's soft memory limit, in the server's environment
#   SERVE_FLAGS="--memory-limit 0" scripts/hostile-rsocket.sh   # without serve's default limit (auto: the budgets plus 128MiB)
#
# "live peak" is the largest heap that survived a garbage collection (the
# server runs with GODEBUG=gctrace=1): what the server really holds. The
# heap and RSS peaks add the garbage a collection has not yet reclaimed,
# up to GOGC (100 %) above the live heap unless GOMEMLIMIT caps it.
#
# Bounded: each flood connection sends at most MAX_FRAMES frames (default
# 32), and a server whose RSS passes RSS_CAP_MB (default 3072) is killed
# (the row says so) so that a server without budgets does not take the
# machine down. Loopback only, ports 27611-27612. Not run in CI (too
# heavy); the raw-frame tests in internal/lab/rsockethostile are.
set -euo pipefail
rev=${1:-}
conns=${CONNS:-100} frame=${FRAME:-1MiB} duration=${DURATION:-35s} serve_flags=${SERVE_FLAGS:-}
max_frames=${MAX_FRAMES:-32} cap_mb=${RSS_CAP_MB:-3072} scheme=${SCHEME:-tcp}
modes=${MODES:-silent half-frame never-reads keepalive-flood request-flood fnf-flood huge-length}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
# shellcheck source=lib/hostile.sh
. "$root/scripts/lib/hostile.sh"
build_bins "$root" "$work" "$rev"
case $scheme in
tcp) url=tcp://127.0.0.1:27611 ;;
ws) url=ws://127.0.0.1:27611/rsocket ;;
*)
  echo "SCHEME must be tcp or ws" >&2
  exit 2
  ;;
esac

# A server too busy to answer /metrics within 2 s gives an empty sample.
heap_mb() { { curl -s --max-time 2 "http://127.0.0.1:27612/metrics" || true; } | awk '$1 == "go_memstats_heap_inuse_bytes" { printf "%.0f", $2 / 1048576 }'; }
rr() { timeout 5 "$work/sluice-new" rsocket rr --url "$url" --data ping 2>/dev/null | grep -qx ping; }

echo "$conns connections per mode, $frame frames, $duration, over $scheme ($(nproc) cores)${serve_flags:+, serve $serve_flags}"
echo
echo "| server | mode | RSS before | RSS peak | heap before | heap peak | live peak | closed by the server | well-behaved client |"
echo "|---|---|---|---|---|---|---|---|---|"
for v in "${bins[@]}"; do
  label=$([ "$v" = old ] && echo "$rev" || echo "working tree")
  for mode in $modes; do
    # shellcheck disable=SC2086 # SERVE_FLAGS is a list of flags
    GODEBUG=gctrace=1 "$work/sluice-$v" rsocket serve --listen "$url" --metrics 127.0.0.1:27612 --log-level error $serve_flags >"$work/$v-$mode.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -sf http://127.0.0.1:27612/metrics >/dev/null && break || sleep 0.1; done
    rss0=$(rss_mb $pid) heap0=$(heap_mb)
    "$work/sluice-new" rsocket hostile --url "$url" --mode "$mode" --conns "$conns" --frame "$frame" \
      --duration "$duration" --max-frames "$max_frames" >"$work/hostile.out" 2>&1 &
    hpid=$!
    # The well-behaved client: 5 requests, 1 s apart, from 1 s in.
    good_loop "$work/good.out" rr &
    gpid=$!
    rss1=$rss0 heap1=$heap0 killed=
    while kill -0 $hpid 2>/dev/null || kill -0 $gpid 2>/dev/null; do
      r=$(rss_mb $pid) h=$(heap_mb)
      [ -n "$r" ] && [ "$r" -gt "$rss1" ] && rss1=$r
      [ -n "$h" ] && [ "$h" -gt "$heap1" ] && heap1=$h
      if [ -z "$killed" ] && [ -n "$r" ] && [ "$r" -gt "$cap_mb" ]; then
        kill -9 $pid 2>/dev/null || true
        killed=" (killed at the ${cap_mb} MB cap)"
      fi
      sleep 0.25
    done
    wait $hpid || true
    wait $gpid || true
    closed=$(sed -n 's/.* \([0-9]*\) closed by the server.*/\1/p' "$work/hostile.out")
    [ -z "$closed" ] && closed=0
    closed="$closed of $conns"
    [ -n "$killed" ] && closed="— (killed)" # the kill closed them
    # gctrace: "gc N @Ts P%: ... A->B->C MB, ...": C is the heap live after it.
    live=$(live_peak "$work/$v-$mode.log")
    echo "| $label | $mode | $rss0 MB | $rss1 MB$killed | $heap0 MB | $heap1 MB | $live MB | $closed | $(cat "$work/good.out") |"
    kill $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
  done
done
