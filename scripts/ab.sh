#!/usr/bin/env bash
# ab.sh REV N BENCH-ARGS...: a before/after comparison on one machine in
# one sitting. Builds sluice at git revision REV and from the working tree,
# then runs `sluice BENCH-ARGS --reps 1 --json` N times for each,
# alternating old and new, so that both meet the same machine load. Each
# run's JSON goes to $OUT (default /tmp/sluice-ab) as old-I.json and
# new-I.json; the tables are printed as they come. Compare the medians of
# the N runs, not single runs.
#
#   scripts/ab.sh 73d2b9a 5 bench delivery --compression plain,zstd,zstd-fastest
#
# For `bench ingest` without --kafka, one broker (scripts/kafka.sh) serves
# every run, passed as --kafka: each run would otherwise start its own,
# and one rep meets that broker's JVM cold (franz-go's rate in such runs
# was 1.05 M records/s where a five-rep run, warming its broker, measured
# 1.67 M; docs/benchmarks.md, issue 27's eleventh pass), and a first run,
# not recorded, warms it (with the shared broker but without it, the
# first run's franz-go still read 1.16 M against 1.37-1.61 M after).
# AB_KAFKA=own keeps the old way.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: scripts/ab.sh REV N BENCH-ARGS..." >&2
  exit 2
fi
rev=$1 n=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/sluice-ab}
mkdir -p "$out"
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git -C "$root" archive "$rev" | tar -x -C "$src"
has_kafka=
for a in "$@"; do
  case $a in --kafka | --kafka=* | -kafka | -kafka=*) has_kafka=1 ;; esac
done
if [ "$1 ${2:-}" = "bench ingest" ] && [ "${AB_KAFKA:-shared}" = shared ] && [ -z "$has_kafka" ]; then
  kdir=$(mktemp -d)
  trap '"$root/scripts/kafka.sh" stop --dir "$kdir" >/dev/null 2>&1 || true; rm -rf "$src" "$kdir"' EXIT
  kaddr=$("$root/scripts/kafka.sh" start --dir "$kdir" --watch-pid $$ | tail -n 1)
  echo "== one broker for every run: $kaddr"
  set -- "$@" --kafka "$kaddr"
  warmup=1
fi
(cd "$src" && go build -o "$out/sluice-old" ./cmd/sluice)
(cd "$root" && go build -o "$out/sluice-new" ./cmd/sluice)
if [ -n "${warmup:-}" ]; then
  echo "== warm-up run of the new build (not recorded)"
  "$out/sluice-new" "$@" --reps 1 >/dev/null
fi
for i in $(seq 1 "$n"); do
  for v in old new; do
    echo "== $v ($([ $v = old ] && echo "$rev" || echo "working tree")), run $i of $n"
    "$out/sluice-$v" "$@" --reps 1 --json "$out/$v-$i.json"
  done
done
echo "JSON of every run in $out"
