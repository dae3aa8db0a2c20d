//go:build mutation_setasidenocopy

package driver

// Mutated build (scripts/mutate.sh): the driver settles a parked message
// (SetAside) without copying it to the dead-letter log first. Killed by
// internal/lab/sim's TestSimulation (INVARIANT lost).
const mutationSetAsideNoCopy = true
