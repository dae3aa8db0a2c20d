//go:build !mutation_watermarkahead && !mutation_deadletterrecopy && !mutation_nosentbound

package spool

// The mutation constants are false in every real build; scripts/mutate.sh
// flips one at a time with its build tag (mutation_on_*.go) to show that
// a named test notices the guarantee gone: TestWatermarkPersistedIsTheAcked
// a persisted watermark one past what the sink acknowledged,
// TestSetAsideOnceAfterCrash a message copied to the dead-letter log a
// second time, TestSentBoundSurvivesRestart (internal/agent) a bound on
// sent ids that does not cover the id sent. Constants, so the mutated branches compile away.
const (
	mutationWatermarkAhead   = false
	mutationDeadLetterRecopy = false
	mutationNoSentBound      = false
)
