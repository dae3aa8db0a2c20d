//go:build mutation_nodedup

package sink

// Mutated build (scripts/mutate.sh): the storage writer skips the dedup check and stores every copy.
const mutationNoDedup = true
