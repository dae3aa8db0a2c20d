//go:build !mutation_noreencode

package ingest

// The mutation constant is false in every real build; scripts/mutate.sh
// flips it with its build tag (mutation_on.go) to show that a named test
// notices the guarantee gone. A constant, so the mutated branch compiles
// away.
const mutationNoReencode = false
