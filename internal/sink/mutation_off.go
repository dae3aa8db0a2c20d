//go:build !mutation_nodedup

package sink

// mutationNoDedup is false in every real build; scripts/mutate.sh flips it
// with -tags mutation_nodedup to show that the simulation (internal/lab/sim)
// notices when the storage writer skips the dedup check and stores every
// copy. A constant, so the mutated branch compiles away.
const mutationNoDedup = false
