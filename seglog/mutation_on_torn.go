//go:build mutation_keeptorntail

package seglog

// Mutated build (scripts/mutate.sh): Open does not truncate a torn final
// record. Killed by TestTornTailTruncatedBeforeAppend.
const (
	mutationSkipCRC            = false
	mutationKeepTornTail       = true
	mutationDamagedAsTorn      = false
	mutationReuseDamagedOffset = false
	mutationIgnoreReservation  = false
)
