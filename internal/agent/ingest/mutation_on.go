//go:build mutation_noreencode

package ingest

// Mutated build (scripts/mutate.sh): the spool writer appends a message
// sealed as Kafka records with the id predicted at seal even when a failed
// append made it wrong, so its records name another message.
const mutationNoReencode = true
