//go:build mutation_renamebeforefsync

package diskstore

// Mutated build (scripts/mutate.sh): Finish renames the upload into place
// before its data is fdatasynced. Killed by TestFinishSyncsBeforeRename.
const (
	mutationRenameBeforeFsync = true
	mutationSkipSHA256        = false
)
