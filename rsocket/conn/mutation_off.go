//go:build !mutation_ignorerequestn && !mutation_ignorelease && !mutation_resumeoffbyone

package conn

// The mutation constants are false in every real build; scripts/mutate.sh
// flips one at a time with its build tag (mutation_on_*.go) to show that a
// named test notices the guarantee gone. Constants, so the mutated
// branches compile away (unlike the mutation variable in stream.go, which
// the simulation's own mutation test sets at run time).
const (
	mutationIgnoreRequestN = false
	mutationIgnoreLease    = false
	mutationResumeOffByOne = false
)
