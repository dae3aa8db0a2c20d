//go:build mutation_skipsha256

package diskstore

// Mutated build (scripts/mutate.sh): Finish does not compare the upload's
// SHA-256 with the expected one. Killed by TestHashMismatchDiscards.
const (
	mutationRenameBeforeFsync = false
	mutationSkipSHA256        = true
)
