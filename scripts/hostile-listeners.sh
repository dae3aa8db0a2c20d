#!/usr/bin/env bash
# hostile-listeners.sh: what hostile clients cost every listener that is
# not RSocket (those are scripts/hostile-rsocket.sh's). The numbers of
# docs/reliability.md's "Hostile clients on every listener" come from here.
#
# For each listener (sink: `sluice sink`'s gRPC; ingest: `sluice agent`'s
# HTTP ingest; xfer-grpc, xfer-tus, xfer-http: `sluice xfer serve`'s
# --grpc, --tus and --http; metrics: `sluice sink`'s --metrics listener),
# every daemon with its defaults, and for each misbehaviour of `sluice
# hostile` (silent, headers-stall, huge-length, flood, never-reads,
# reset), it starts a fresh daemon (temp dirs, loopback), warms it up
# (one full exchange of the well-behaved client below, so that the code
# and buffers of its serving path are in memory, as in a daemon that has
# served), waits for its RSS to settle (SETTLE_S seconds, default 6, the
# quiet that internal/memrelease waits for, without the RSS moving by
# more than 1 MB; at most 30 s), records that RSS as the start, lets
# CONNS hostile connections (default 100) misbehave for
# DURATION (default 35s), samples RSS every 0.25 s meanwhile, and has a
# well-behaved client ask 5 times, 1 s apart, each bounded to 5 s
# (sink: `sluice consume`; ingest: a POST of one record; xfer-grpc and
# xfer-tus: `sluice xfer send` of 64 KiB; xfer-http: a POST of 64 KiB;
# metrics: GET /metrics). After the hostile clients go it waits up to
# 15 s for the RSS to come back within 10 % of where it started. It
# prints a markdown table: RSS before, peak, after (and whether within
# 10 %; before and after split into anonymous + file-backed, from
# /proc/PID/smaps_rollup: Anonymous, and Rss less Anonymous, which is
# the binary's code and data pages), the largest live heap
# (GODEBUG=gctrace=1: the heap a collection left, what the daemon
# really holds), how many hostile connections the
# daemon closed before DURATION, and the well-behaved client's answers.
# After the table, for each row, what grew from the start to after they
# go, read from the daemon's /metrics: the Go runtime's memory classes
# (go_memory_classes_*_bytes, runtime/metrics' /memory/classes/...) and
# the goroutines.
#
#   scripts/hostile-listeners.sh
#   CONNS=20 DURATION=5s TARGETS="sink ingest" MODES="silent flood" scripts/hostile-listeners.sh
#   PORT_BASE=27700 TARGETS=metrics scripts/hostile-listeners.sh   # several at once, apart
#
# The hostile connections come from SOURCE (default 127.0.0.2), the
# well-behaved client from 127.0.0.1: the sink caps unidentified
# connections per address (64), so that hostile clients sharing the
# well-behaved one's address would have it refused by design
# (SOURCE=127.0.0.1 shows that).
#
# Bounded: each flood connection sends at most MAX_REQUESTS requests or
# streams, and resets at most as many times (default 2000); a daemon
# whose RSS passes RSS_CAP_MB (default 3072) is killed (the row says so).
# Loopback only, ports PORT_BASE..PORT_BASE+3 (default 27621). Not run in
# CI (too heavy); TestHostileListeners (internal/lab/hostile) is.
set -euo pipefail
conns=${CONNS:-100} duration=${DURATION:-35s} max_requests=${MAX_REQUESTS:-2000} cap_mb=${RSS_CAP_MB:-3072}
source=${SOURCE:-127.0.0.2}
targets=${TARGETS:-sink ingest xfer-grpc xfer-tus xfer-http metrics}
modes=${MODES:-silent headers-stall huge-length flood never-reads reset}
base=${PORT_BASE:-27621}
p_main=127.0.0.1:$base p_metrics=127.0.0.1:$((base + 1)) p_tus=127.0.0.1:$((base + 2)) p_http=127.0.0.1:$((base + 3))
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
(cd "$root" && go build -o "$work/sluice" ./cmd/sluice)
head -c 65536 /dev/urandom >"$work/good.bin"
# shellcheck source=lib/hostile.sh
. "$root/scripts/lib/hostile.sh"

# start TARGET: starts the daemon the target listens in; echoes the
# hostile address.
start() {
  local d=$work/run-$1-$2
  mkdir -p "$d"
  case $1 in
  sink | metrics)
    GODEBUG=gctrace=1 "$work/sluice" sink --listen "$p_main" --data "$d/data" --metrics "$p_metrics" --log-level error >"$d/log" 2>&1 &
    ;;
  ingest)
    GODEBUG=gctrace=1 "$work/sluice" agent --sink 127.0.0.1:1 --spool "$d/spool" --ingest "$p_main" --metrics "$p_metrics" \
      --log-level error >"$d/log" 2>&1 &
    ;;
  xfer-*)
    GODEBUG=gctrace=1 "$work/sluice" xfer serve --dir "$d/files" --grpc "$p_main" --tus "$p_tus" --http "$p_http" \
      --metrics "$p_metrics" --log-level error >"$d/log" 2>&1 &
    ;;
  esac
}

addr_of() {
  case $1 in
  sink | ingest | xfer-grpc) echo "$p_main" ;;
  xfer-tus) echo "$p_tus" ;;
  xfer-http) echo "$p_http" ;;
  metrics) echo "$p_metrics" ;;
  esac
}

# good TARGET I: one well-behaved request, bounded to 5 s.
good() {
  case $1 in
  sink) timeout 5 "$work/sluice" consume --sink "$p_main" >/dev/null 2>&1 ;;
  ingest) timeout 5 curl -sf --max-time 5 -H 'Content-Type: application/x-ndjson' --data-binary '{"good":1}' "http://$p_main/v1/records" >/dev/null ;;
  xfer-grpc) timeout 5 "$work/sluice" xfer send "$work/good.bin" --to "grpc://$p_main" --name "good-g-$2" --log-level error >/dev/null 2>&1 ;;
  xfer-tus) timeout 5 "$work/sluice" xfer send "$work/good.bin" --to "http://$p_tus/files/" --name "good-t-$2" --log-level error >/dev/null 2>&1 ;;
  xfer-http) timeout 5 curl -sf --max-time 5 --data-binary @"$work/good.bin" "http://$p_http/post/good-h-$2" >/dev/null ;;
  metrics) timeout 5 curl -sf --max-time 5 -o "$work/metrics.out" "http://$p_metrics/metrics" && grep -q go_goroutines "$work/metrics.out" ;;
  esac
}

# mem PID: "RSS ANON FILE" in kB from smaps_rollup (FILE = Rss less
# Anonymous: the binary's pages); nothing once the process is gone.
mem() {
  awk '/^Rss:/ { r = $2 } /^Anonymous:/ { a = $2 } END { if (r != "") print r, a, r - a }' "/proc/$1/smaps_rollup" 2>/dev/null || true
}

# mb KB: kB as whole MB.
mb() { echo $((($1 + 512) / 1024)); }

# split "RSS ANON FILE": "R MB (A + F)".
split() { echo "$(mb "$1") MB ($(mb "$2") + $(mb "$3"))"; }

# settle PID: waits until the RSS has moved by at most 1 MB over the last
# SETTLE_S seconds (at most 30 s), sampling every second.
settle() {
  local hist=() r i lo hi
  for i in $(seq 30); do
    read -r r _ _ <<<"$(mem "$1")"
    [ -z "$r" ] && return
    hist+=("$r")
    if [ "${#hist[@]}" -gt "$settle_s" ]; then
      lo=$r hi=$r
      for r in "${hist[@]: -$((settle_s + 1))}"; do
        [ "$r" -lt "$lo" ] && lo=$r
        [ "$r" -gt "$hi" ] && hi=$r
      done
      [ $((hi - lo)) -le 1024 ] && return
    fi
    sleep 1
  done
}

# classes OUT: the daemon's memory classes and goroutines, "name value"
# lines, from its /metrics.
classes() {
  curl -sf --max-time 5 "http://$p_metrics/metrics" |
    awk '/^go_memory_classes_.*_bytes / || /^go_goroutines / { print $1, $2 }' >"$1" || true
}

# growth BEFORE AFTER: "name +N MB" for each class that grew by 0.5 MB
# or more, and the goroutines before → after.
growth() {
  awk 'NR == FNR { b[$1] = $2; next }
    $1 == "go_goroutines" { g = sprintf("goroutines %d → %d", b[$1], $2); next }
    $1 != "go_memory_classes_total_bytes" { d = ($2 - b[$1]) / 1048576; if (d >= 0.5 || d <= -0.5) printf "%s %+.1f MB, ", substr($1, 19), d }
    END { print g }' "$1" "$2"
}

settle_s=${SETTLE_S:-6}
breakdown=$work/breakdown
: >"$breakdown"
echo "$conns connections per mode from $source, $duration, at most $max_requests requests, streams or resets per connection ($(nproc) cores); daemons with their defaults"
echo
echo "| listener | mode | RSS before (anon + file) | RSS peak | RSS after they go (anon + file) | live heap peak | closed by the server | well-behaved client |"
echo "|---|---|---|---|---|---|---|---|"
for target in $targets; do
  for mode in $modes; do
    start "$target" "$mode"
    pid=$!
    log=$work/run-$target-$mode/log
    for _ in $(seq 100); do curl -sf "http://$p_metrics/metrics" >/dev/null && break || sleep 0.1; done
    # The start is a daemon that has served: one exchange of the
    # well-behaved client, then the RSS settled.
    good "$target" 0 || true
    settle $pid
    read -r rss0k anon0 file0 <<<"$(mem $pid)"
    rss0=$(mb "$rss0k")
    classes "$work/classes0"
    "$work/sluice" hostile --target "$target" --addr "$(addr_of "$target")" --mode "$mode" --conns "$conns" --source "$source" \
      --duration "$duration" --max-requests "$max_requests" >"$work/hostile.out" 2>&1 &
    hpid=$!
    good_loop "$work/good.out" good "$target" &
    gpid=$!
    rss1=$rss0 killed=
    while kill -0 $hpid 2>/dev/null || kill -0 $gpid 2>/dev/null; do
      r=$(rss_mb $pid)
      [ -n "$r" ] && [ "$r" -gt "$rss1" ] && rss1=$r
      if [ -z "$killed" ] && [ -n "$r" ] && [ "$r" -gt "$cap_mb" ]; then
        kill -9 $pid 2>/dev/null || true
        killed=" (killed at the ${cap_mb} MB cap)"
      fi
      sleep 0.25
    done
    wait $hpid || true
    wait $gpid || true
    # After they go: up to 15 s for the RSS to come back within 10 %.
    after=— back=no
    for _ in $(seq 60); do
      read -r rss2k anon2 file2 <<<"$(mem $pid)"
      [ -z "$rss2k" ] && break
      after=$(split "$rss2k" "$anon2" "$file2")
      if [ "$rss2k" -le $((rss0k + rss0k / 10)) ]; then
        back=yes
        break
      fi
      sleep 0.25
    done
    classes "$work/classes2"
    echo "- $target/$mode: $(growth "$work/classes0" "$work/classes2")" >>"$breakdown"
    closed=$(sed -n 's/.* \([0-9]*\) closed by the server.*/\1/p' "$work/hostile.out")
    closed="${closed:-0} of $conns"
    [ -n "$killed" ] && closed="— (killed)"
    grep -q "no connection" "$work/hostile.out" && closed="$closed ($(tail -1 "$work/hostile.out"))"
    live=$(live_peak "$log")
    echo "| $target | $mode | $(split "$rss0k" "$anon0" "$file0") | $rss1 MB$killed | $after (within 10 %: $back) | $live MB | $closed | $(cat "$work/good.out") |"
    kill $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
  done
done
echo
echo "What grew from the start to after they go (runtime memory classes, from the daemon's /metrics):"
echo
cat "$breakdown"
