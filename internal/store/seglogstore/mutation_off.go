//go:build !mutation_ackbeforefsync

package seglogstore

// mutationAckBeforeFsync is false in every real build; scripts/mutate.sh
// flips it with -tags mutation_ackbeforefsync to show that the simulation
// (internal/lab/sim) notices when the store does not fdatasync before Append
// returns, so the sink acks what is not durable. A constant, so the
// mutated branch compiles away.
const mutationAckBeforeFsync = false
