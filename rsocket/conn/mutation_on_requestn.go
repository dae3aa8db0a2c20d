//go:build mutation_ignorerequestn

package conn

// Mutated build (scripts/mutate.sh): SendPayload sends beyond the peer's REQUEST_N credits.
const (
	mutationIgnoreRequestN = true
	mutationIgnoreLease    = false
	mutationResumeOffByOne = false
)
