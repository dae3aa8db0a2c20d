//go:build !mutation_crcskip && !mutation_keeptorntail && !mutation_damagedastorn && !mutation_reusedamagedoffset && !mutation_ignorereservation

package seglog

// The mutation constants are false in every real build; scripts/mutate.sh
// flips one at a time with its build tag (mutation_on_*.go) to show that a
// named test notices the guarantee gone. Constants, so the mutated
// branches compile away.
const (
	mutationSkipCRC            = false
	mutationKeepTornTail       = false
	mutationDamagedAsTorn      = false
	mutationReuseDamagedOffset = false
	mutationIgnoreReservation  = false
)
