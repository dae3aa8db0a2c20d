//go:build mutation_notimeoutrequeue

package delivery

// Mutated build (scripts/mutate.sh): the Sender does not requeue a message
// whose resend timeout fired. Killed by TestTimeoutResendsLostMessage.
const (
	mutationNoTimeoutRequeue = true
	mutationWindowOverrun    = false
	mutationSetAsideAny      = false
)
