//go:build mutation_windowoverrun

package delivery

// Mutated build (scripts/mutate.sh): the Sender ignores its in-flight
// message window. Killed by TestSenderStaysWithinWindow.
const (
	mutationNoTimeoutRequeue = false
	mutationWindowOverrun    = true
	mutationSetAsideAny      = false
)
