//go:build mutation_ignorereservation

package seglog

// Mutated build (scripts/mutate.sh): Open ignores the offset reservation,
// so after a machine crash under SyncInterval or SyncNone the next records
// take offsets the lost tail had handed out. Killed by
// TestReservationSurvivesLostTail.
const (
	mutationSkipCRC            = false
	mutationKeepTornTail       = false
	mutationDamagedAsTorn      = false
	mutationReuseDamagedOffset = false
	mutationIgnoreReservation  = true
)
