//go:build mutation_seqanyorder

package kafkastore

// Mutated build (scripts/mutate.sh): seqCore takes a stored answer for
// any batch, not only the partition's oldest unanswered one. Killed by
// TestSeqCoreSimulation.
const (
	mutationSeqIgnoreGen = false
	mutationSeqAnyOrder  = true
)
