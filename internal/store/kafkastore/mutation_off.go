//go:build !mutation_seqignoregen && !mutation_seqanyorder

package kafkastore

// The mutation constants are false in every real build; scripts/mutate.sh
// flips one at a time with its build tag (mutation_on_*.go) to show that
// a named test notices the guarantee gone. Constants, so the mutated
// branches compile away.
const (
	mutationSeqIgnoreGen = false
	mutationSeqAnyOrder  = false
)
