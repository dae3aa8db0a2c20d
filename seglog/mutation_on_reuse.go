//go:build mutation_reusedamagedoffset

package seglog

// Mutated build (scripts/mutate.sh): Open quarantines a final record
// damaged after it was written whole but leaves no gap in its place, so
// the next record takes its offset. Killed by TestDamagedTailKeepsItsOffset.
const (
	mutationSkipCRC            = false
	mutationKeepTornTail       = false
	mutationDamagedAsTorn      = false
	mutationReuseDamagedOffset = true
	mutationIgnoreReservation  = false
)
