//go:build mutation_ackbeforefsync

package seglogstore

// Mutated build (scripts/mutate.sh): the store does not fdatasync before Append returns, so the sink acks what is not durable.
const mutationAckBeforeFsync = true
