//go:build mutation_watermarkahead

package spool

// Mutated build (scripts/mutate.sh): Acknowledge persists a watermark one
// past the acknowledged one, so a restart skips an unacknowledged message.
const (
	mutationWatermarkAhead   = true
	mutationDeadLetterRecopy = false
	mutationNoSentBound      = false
)
