//go:build mutation_ignorelease

package conn

// Mutated build (scripts/mutate.sh): the responder admits requests beyond the lease it sent.
const (
	mutationIgnoreRequestN = false
	mutationIgnoreLease    = true
	mutationResumeOffByOne = false
)
