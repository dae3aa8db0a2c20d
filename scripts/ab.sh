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
(cd "$src" && go build -o "$out/sluice-old" ./cmd/sluice)
(cd "$root" && go build -o "$out/sluice-new" ./cmd/sluice)
for i in $(seq 1 "$n"); do
  for v in old new; do
    echo "== $v ($([ $v = old ] && echo "$rev" || echo "working tree")), run $i of $n"
    "$out/sluice-$v" "$@" --reps 1 --json "$out/$v-$i.json"
  done
done
echo "JSON of every run in $out"
