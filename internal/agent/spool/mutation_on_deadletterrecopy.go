//go:build mutation_deadletterrecopy

package spool

// Mutated build (scripts/mutate.sh): SetAside copies a message to the
// dead-letter log even when the log already holds it (as after a crash
// before the watermark passed it), so it is there twice.
const (
	mutationWatermarkAhead   = false
	mutationDeadLetterRecopy = true
	mutationNoSentBound      = false
)
