//go:build mutation_crcskip

package seglog

// Mutated build (scripts/mutate.sh): a record's CRC-32C is not checked on
// read. Killed by TestDamagedRecordIsNeverReturned.
const (
	mutationSkipCRC            = true
	mutationKeepTornTail       = false
	mutationDamagedAsTorn      = false
	mutationReuseDamagedOffset = false
	mutationIgnoreReservation  = false
)
