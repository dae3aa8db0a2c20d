#!/usr/bin/env bash
# Mutation runs: the simulation (internal/lab/sim) must FAIL when each of these
# is removed from the code; this script fails if any mutation survives.
#   mutation_notimeoutrequeue  delivery.Sender does not requeue on a resend timeout
#   mutation_nodedup           the sink's storage writer skips the dedup check
#   mutation_ackbeforefsync    the embedded store does not fdatasync before Append returns
# Each is a build tag flipping a constant (mutation_on.go / mutation_off.go
# beside the code); real builds never set them.
#   scripts/mutate.sh          200 seeds each (what CI runs)
#   scripts/mutate.sh 1000     more seeds each
set -uo pipefail
cd "$(dirname "$0")/.."
seeds="${1:-200}"
survived=()
# What each mutation must make the simulation report: a failure of another
# kind (a healthy seed slowed past the budget on a loaded machine, a
# crash) does not count as killing it.
declare -A expect=(
	[mutation_notimeoutrequeue]='accepted records missing|unacknowledged after'
	[mutation_nodedup]='stored twice'
	[mutation_ackbeforefsync]='accepted records missing'
)
# MUTATIONS overrides the list (a tag that changes nothing must survive,
# which shows that this script fails then).
for m in ${MUTATIONS:-mutation_notimeoutrequeue mutation_nodedup mutation_ackbeforefsync}; do
	echo "== $m ($seeds seeds, stops at the first failing seed)"
	# A shorter budget than the default: a healthy seed converges in well
	# under a second alone (seconds on a loaded machine), and a mutant
	# that lost a message never does.
	out=$(timeout 600 go test -count=1 -tags "$m" ./internal/lab/sim/ -run 'TestSimulation$' \
		-sim.seeds="$seeds" -sim.failfast -sim.budget=10s -v 2>&1)
	rc=$?
	if [[ $rc -ne 0 ]] && grep -Eq "^    sim_test.go:[0-9]*: seed [0-9]*: .*(${expect[$m]:-.})" <<<"$out"; then
		grep -m1 -A1 '^    sim_test.go:[0-9]*: seed [0-9]*:' <<<"$out" | cut -c1-240
		echo "   killed: the simulation failed, as it must"
	else
		echo "$out" | tail -5
		echo "   SURVIVED: the simulation did not notice $m (rc=$rc)"
		survived+=("$m")
	fi
done
if [[ ${#survived[@]} -gt 0 ]]; then
	echo "mutations that survived: ${survived[*]}"
	exit 1
fi
echo "all mutations killed"
