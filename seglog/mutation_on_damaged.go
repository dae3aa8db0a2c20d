//go:build mutation_damagedastorn

package seglog

// Mutated build (scripts/mutate.sh): Open takes a final record damaged
// after it was written whole for a torn write and drops its bytes without
// keeping them in the quarantine. Killed by TestDamagedTailQuarantined.
const (
	mutationSkipCRC            = false
	mutationKeepTornTail       = false
	mutationDamagedAsTorn      = true
	mutationReuseDamagedOffset = false
	mutationIgnoreReservation  = false
)
