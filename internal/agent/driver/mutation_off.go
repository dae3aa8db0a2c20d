//go:build !mutation_setasidenocopy

package driver

// The mutation constants are false in every real build; scripts/mutate.sh
// flips one at a time with its build tag (mutation_on_*.go) to show that a
// named test notices the guarantee gone.
const mutationSetAsideNoCopy = false
