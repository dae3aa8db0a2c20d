//go:build mutation_setasideany

package delivery

// Mutated build (scripts/mutate.sh): SetAside settles a message whatever
// its state, not only a parked one, so a stale SetAside (for a message in
// flight or queued again) lets the watermark pass a message the sink never
// stored. Killed by TestSetAsideSettlesOnlyParked.
const (
	mutationNoTimeoutRequeue = false
	mutationWindowOverrun    = false
	mutationSetAsideAny      = true
)
