//go:build !mutation_notimeoutrequeue && !mutation_windowoverrun && !mutation_setasideany

package delivery

// The mutation constants are false in every real build; scripts/mutate.sh
// flips one at a time with its build tag (mutation_on_*.go) to show that a
// named test notices the guarantee gone. Constants, so the mutated
// branches compile away.
const (
	mutationNoTimeoutRequeue = false
	mutationWindowOverrun    = false
	mutationSetAsideAny      = false
)
