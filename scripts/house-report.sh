#!/usr/bin/env bash
# Prints the figures of issue 25's done-means for this tree, to compare a
# before and an after:
#   - non-test lines of cmd/sluice and its functions over 80 lines,
#     the top-level entries of internal/, and each package's longest file
#     and longest function (go/ast: go run ./internal/lab/housereport);
#   - the duplicate-code pairs (`duplicates`, when it is on PATH);
#   - the static-check findings (scripts/lint.sh: staticcheck, deadcode).
# Usage: scripts/house-report.sh [--no-lint]   (--no-lint skips the last,
# which installs the tools on first use and takes a minute or two).
set -euo pipefail
cd "$(dirname "$0")/.."

lint=1
for arg in "$@"; do
  case "$arg" in
    --no-lint) lint=0 ;;
    -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "house-report.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

echo "== sizes (go run ./internal/lab/housereport)"
go run ./internal/lab/housereport

echo
echo "== duplicate pairs"
if command -v duplicates >/dev/null; then
  duplicates --seconds 120 --most 1 | head -1
else
  echo "duplicates is not on PATH: not counted"
fi

echo
echo "== static checks (scripts/lint.sh)"
if [ "$lint" = 0 ]; then
  echo "skipped (--no-lint)"
elif out=$(bash scripts/lint.sh 2>&1); then
  echo "$out" | grep -E '^(staticcheck|deadcode):'
else
  echo "$out" | tail -40
  echo "lint.sh failed: the findings are above"
fi
