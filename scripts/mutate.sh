#!/usr/bin/env bash
# Mutation runs: each mutant removes one guarantee (a build tag flipping a
# constant in mutation_off.go / mutation_on*.go beside the code; real
# builds never set them), and a named test must then FAIL on the invariant
# that guarantee protects. The script fails if any mutant survives or if
# any control fails.
#
# A kill counts only when the failure names the mutant's invariant: every
# killing test reports with a line that starts "INVARIANT <category>:".
# The simulation (internal/lab/sim) reports a seed that did not converge
# in time as "BUDGET exceeded:", which never counts: a healthy seed on a
# loaded machine can be slow, it never breaks an invariant.
#
# Controls: each killing command also runs without the tag first and must
# pass. If a control fails, the test, the budget or the machine is the
# problem, not a mutant, and the script fails without judging the mutants.
#
# docs/simulation.md has the same table; internal/docs checks that it lists
# exactly these mutants and that every tag in the code is one of them.
#
#   scripts/mutate.sh          200 simulation seeds (what CI runs)
#   scripts/mutate.sh 1000     more seeds for the simulation's mutants
#   MUTATIONS="mutation_nodedup mutation_crcskip" scripts/mutate.sh
#                              only these (an unknown tag fails)
set -uo pipefail
cd "$(dirname "$0")/.."
seeds="${1:-200}"
# The simulation's budget for a seed to converge once the faults stop
# (SIM_BUDGET overrides it; SIM_BUDGET=20ms shows the control failing): a
# healthy seed takes well under 2 s even on a loaded machine, and a seed
# that runs out of it counts for nothing either way.
budget="${SIM_BUDGET:-10s}"

# tag | package | killing test | invariant the test must report
mutants=(
	"mutation_notimeoutrequeue|./internal/delivery/|TestTimeoutResendsLostMessage|lost"
	"mutation_windowoverrun|./internal/delivery/|TestSenderStaysWithinWindow|window-exceeded"
	"mutation_setasideany|./internal/delivery/|TestSetAsideSettlesOnlyParked|lost"
	"mutation_nodedup|./internal/lab/sim/|TestSimulation|duplicated"
	"mutation_ackbeforefsync|./internal/lab/sim/|TestSimulation|acked-before-durable"
	"mutation_setasidenocopy|./internal/lab/sim/|TestSimulation|lost"
	"mutation_watermarkahead|./internal/agent/spool/|TestWatermarkPersistedIsTheAcked|lost"
	"mutation_deadletterrecopy|./internal/agent/spool/|TestSetAsideOnceAfterCrash|duplicated"
	"mutation_nosentbound|./internal/agent/|TestSentBoundSurvivesRestart|refused"
	"mutation_noreencode|./internal/agent/ingest/|TestKafkaIDsAfterFailedAppend|wrong-id"
	"mutation_crcskip|./seglog/|TestDamagedRecordIsNeverReturned|corrupted"
	"mutation_keeptorntail|./seglog/|TestTornTailTruncatedBeforeAppend|torn-tail"
	"mutation_damagedastorn|./seglog/|TestDamagedTailQuarantined|quarantined"
	"mutation_reusedamagedoffset|./seglog/|TestDamagedTailKeepsItsOffset|offset-reused"
	"mutation_ignorereservation|./seglog/|TestReservationSurvivesLostTail|offset-reused"
	"mutation_ignorerequestn|./rsocket/conn/|TestCreditsSaturateButCount|request-n"
	"mutation_resumeoffbyone|./rsocket/conn/|TestResumeSimEveryBoundary|duplicated"
	"mutation_ignorelease|./rsocket/conn/|TestLease|lease"
	"mutation_renamebeforefsync|./internal/xfer/diskstore/|TestFinishSyncsBeforeRename|rename-before-fsync"
	"mutation_skipsha256|./internal/xfer/diskstore/|TestHashMismatchDiscards|checksum"
	"mutation_seqignoregen|./internal/store/kafkastore/|TestSeqCoreSimulation|stale-answer"
	"mutation_seqanyorder|./internal/store/kafkastore/|TestSeqCoreSimulation|acked-out-of-order"
)

# run TAGS PKG TEST: the killing command, with TAGS ("" for the control).
run() {
	local extra=()
	if [[ $2 == ./internal/lab/sim/ ]]; then
		extra=(-sim.seeds="$seeds" -sim.failfast -sim.budget="$budget")
	fi
	timeout 600 go test -count=1 -tags "$1" "$2" -run "^$3\$" "${extra[@]}" -v 2>&1
}

selected=()
for m in "${mutants[@]}"; do
	tag=${m%%|*}
	if [[ -z ${MUTATIONS:-} || " $MUTATIONS " == *" $tag "* ]]; then
		selected+=("$m")
	fi
done
for t in ${MUTATIONS:-}; do
	if ! printf '%s\n' "${mutants[@]}" | grep -q "^$t|"; then
		echo "unknown mutant $t: it has no killing test in scripts/mutate.sh"
		exit 1
	fi
done

start=$SECONDS
echo "== controls: every killing command without its tag must pass"
declare -A controlled=()
for m in "${selected[@]}"; do
	IFS='|' read -r tag pkg test inv <<<"$m"
	key="$pkg $test"
	[[ -n ${controlled[$key]:-} ]] && continue
	controlled[$key]=1
	out=$(run "" "$pkg" "$test")
	rc=$?
	if [[ $rc -ne 0 ]] || ! grep -q -- "^--- PASS: $test " <<<"$out"; then
		echo "$out" | grep -E '^\s+\S+_test\.go:[0-9]+: |^(--- FAIL|FAIL|ok)' | head -8 | cut -c1-240
		echo "CONTROL FAILED: $pkg $test fails (rc=$rc) or did not run without any mutation;"
		echo "the mutants cannot be judged (with the simulation: is -sim.budget=$budget too short for this machine?)"
		exit 1
	fi
	echo "   ok  $pkg $test"
done

echo "== mutants: each must fail its killing test on its own invariant"
survived=()
for m in "${selected[@]}"; do
	IFS='|' read -r tag pkg test inv <<<"$m"
	out=$(run "$tag" "$pkg" "$test")
	rc=$?
	line=$(grep -m1 -E "^\s+\S+_test\.go:[0-9]+: INVARIANT $inv:" <<<"$out")
	if [[ $rc -ne 0 && -n $line ]]; then
		echo "   killed   $tag by $test: $(sed -E 's/^\s+//' <<<"$line" | cut -c1-160)"
	else
		echo "$out" | grep -E '^\s+\S+_test\.go:[0-9]+: |^(--- FAIL|FAIL|ok)' | head -5 | cut -c1-240
		echo "   SURVIVED $tag: $test did not report \"INVARIANT $inv\" (rc=$rc)"
		survived+=("$tag")
	fi
done
echo "== $((${#selected[@]} - ${#survived[@]})) of ${#selected[@]} mutants killed in $((SECONDS - start))s"
if [[ ${#survived[@]} -gt 0 ]]; then
	echo "mutants that survived: ${survived[*]}"
	exit 1
fi
