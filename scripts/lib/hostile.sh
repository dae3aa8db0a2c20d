# shellcheck shell=bash
# What scripts/hostile-rsocket.sh, scripts/hostile-listeners.sh and
# scripts/stalled-senders.sh share. Sourced, not run.

# build_bins ROOT WORK [REV]: builds ROOT's working tree to WORK/sluice-new
# and, with REV, that git revision to WORK/sluice-old (before/after), and
# sets bins to the builds' names (old first).
build_bins() {
  local root=$1 work=$2 rev=${3:-}
  (cd "$root" && go build -o "$work/sluice-new" ./cmd/sluice)
  bins=(new)
  if [ -n "$rev" ]; then
    mkdir "$work/src"
    git -C "$root" archive "$rev" | tar -x -C "$work/src"
    (cd "$work/src" && go build -o "$work/sluice-old" ./cmd/sluice)
    bins=(old new)
  fi
}

# rss_mb PID: the process's VmRSS in MB ("" once it is gone).
rss_mb() { awk '/^VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || true; }

# good_loop OUT CMD...: the well-behaved client. From 1 s in, runs
# CMD I (I = 1..5) 1 s apart and writes "N/5 answered, slowest M ms" to OUT.
good_loop() {
  local out=$1 ok=0 slow=0 t0 dt i
  shift
  sleep 1
  for i in 1 2 3 4 5; do
    t0=$(date +%s%N)
    "$@" "$i" && ok=$((ok + 1))
    dt=$((($(date +%s%N) - t0) / 1000000))
    [ "$dt" -gt "$slow" ] && slow=$dt
    sleep 1
  done
  echo "$ok/5 answered, slowest $slow ms" >"$out"
}

# live_peak LOG: the largest heap a collection left, in MB, from the
# GODEBUG=gctrace=1 lines of LOG ("gc N @Ts P%: ... A->B->C MB, ...").
live_peak() {
  local live
  live=$(sed -n 's/.* [0-9]*->[0-9]*->\([0-9]*\) MB.*/\1/p' "$1" | sort -n | tail -1)
  echo "${live:-0}"
}
