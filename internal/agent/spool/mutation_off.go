//go:build !mutation_watermarkahead

package spool

// mutationWatermarkAhead is false in every real build; scripts/mutate.sh
// flips it with -tags mutation_watermarkahead to show that
// TestWatermarkPersistedIsTheAcked notices a persisted watermark one past
// what the sink acknowledged. A constant, so the branch compiles away.
const mutationWatermarkAhead = false
