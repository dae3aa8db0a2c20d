//go:build mutation_seqignoregen

package kafkastore

// Mutated build (scripts/mutate.sh): seqCore counts answers to batches
// sent before a re-send. Killed by TestSeqCoreSimulation.
const (
	mutationSeqIgnoreGen = true
	mutationSeqAnyOrder  = false
)
