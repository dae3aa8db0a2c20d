//go:build mutation_nosentbound

package spool

// Mutated build (scripts/mutate.sh): ReserveSent persists a bound at the
// id it lets out instead of beyond it, so a restarted agent's Hello
// claims it never sent an id the sink holds, and is refused.
const (
	mutationWatermarkAhead   = false
	mutationDeadLetterRecopy = false
	mutationNoSentBound      = true
)
