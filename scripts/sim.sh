#!/usr/bin/env bash
# The long simulation run: the real agent and sink over memconn with seeded
# faults and crashes (internal/lab/sim, docs/simulation.md).
#   scripts/sim.sh                 10,000 seeds
#   scripts/sim.sh 50000           more
#   scripts/sim.sh 100 20000       100 seeds from seed 20000
#   SIM_SEED=1234 scripts/sim.sh   replay one seed, verbose
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -n "${SIM_SEED:-}" ]]; then
	exec go test -count=1 ./internal/lab/sim/ -run 'TestSimulation$' -sim.seed="$SIM_SEED" -v
fi
exec go test -count=1 -timeout 2h ./internal/lab/sim/ -run 'TestSimulation$' \
	-sim.seeds="${1:-10000}" -sim.first="${2:-0}" -v
