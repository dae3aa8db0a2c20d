#!/usr/bin/env bash
# Runs fuzz targets one after another, each for FUZZTIME (default 10m), and
# optionally copies what the fuzzer found interesting into the package's
# testdata/fuzz/ so the corpus is committed and replayed by plain `go test`.
#
#   scripts/fuzz.sh                       # every target in the module
#   scripts/fuzz.sh ./rsocket/...         # the targets under these packages
#   FUZZTIME=30s scripts/fuzz.sh ./seglog # a short slice
#   KEEP=200 scripts/fuzz.sh ./rsocket/...  # also commit up to 200 new inputs per target
#
# One target at a time with PARALLEL workers (default 1), so it can run beside
# other work (`nice -n 19 scripts/fuzz.sh`). A finding stops the script with
# the failing input written to testdata/fuzz/ by `go test` itself.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-10m}
parallel=${PARALLEL:-1}
keep=${KEEP:-0}
pkgs=("$@")
[ ${#pkgs[@]} -eq 0 ] && pkgs=(./...)

cache=$(go env GOCACHE)/fuzz
module=$(go list -m)

for pkg in $(go list "${pkgs[@]}"); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u || true)
	for t in $targets; do
		echo "== $(date -u +%H:%M:%S) $pkg $t for $fuzztime"
		go test -run '^$' -fuzz "^${t}\$" -fuzztime "$fuzztime" -parallel "$parallel" "$pkg" 2>&1 | tail -3
		if [ "$keep" -gt 0 ] && [ -d "$cache/$pkg/$t" ]; then
			mkdir -p "$dir/testdata/fuzz/$t"
			# The smallest inputs first: they cover the same paths as big
			# ones and keep the repository small.
			ls -S -r "$cache/$pkg/$t" | head -n "$keep" | while read -r f; do
				cp -n "$cache/$pkg/$t/$f" "$dir/testdata/fuzz/$t/$f"
			done
			echo "   corpus: $(ls "$dir/testdata/fuzz/$t" | wc -l) files in ${dir#$PWD/}/testdata/fuzz/$t"
		fi
	done
done
echo "== $(date -u +%H:%M:%S) done (module $module)"
