//go:build mutation_resumeoffbyone

package conn

// Mutated build (scripts/mutate.sh): the server replays from one byte before the client's last received position.
const (
	mutationIgnoreRequestN = false
	mutationIgnoreLease    = false
	mutationResumeOffByOne = true
)
