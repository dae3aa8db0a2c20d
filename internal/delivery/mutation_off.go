//go:build !mutation_notimeoutrequeue

package delivery

// mutationNoTimeoutRequeue is false in every real build; scripts/mutate.sh
// flips it with -tags mutation_notimeoutrequeue to show that the
// simulation (internal/lab/sim) notices when the Sender does not requeue a
// message whose resend timeout fired. A constant, so the mutated branch
// compiles away.
const mutationNoTimeoutRequeue = false
