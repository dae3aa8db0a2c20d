package rsocketd

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/sluicehq/sluice/internal/cliflag"
	"github.com/sluicehq/sluice/internal/defaults"
)

// MemoryLimit is `sluice rsocket serve --memory-limit`: auto (the default), 0 (no
// limit of ours) or a size.
//
// The budgets bound what the server holds for its peers, not the heap:
// the collector lets garbage grow to GOGC (100 %) above the live heap
// before it runs, and under a flood of large frames the garbage (copies
// the machine and the handlers made, answers written) is as large as what
// is held, so without a limit RSS runs to about twice the budgets
// (docs/rsocket.md, "Hostile clients"). A soft limit makes the collector
// run sooner near it instead; it never fails an allocation.
type MemoryLimit struct {
	set  bool  // a size was given (0 included)
	size int64 // the size; 0: none
}

func (m *MemoryLimit) String() string {
	if m == nil || !m.set {
		return "auto"
	}
	return defaults.FormatSize(m.size)
}

func (m *MemoryLimit) Set(s string) error {
	if strings.TrimSpace(s) == "auto" {
		*m = MemoryLimit{}
		return nil
	}
	n, err := cliflag.ParseSize(s)
	if err != nil {
		return &cliflag.ValueError{Value: s, Want: "want auto, 0 or a size such as 512MiB"}
	}
	*m = MemoryLimit{set: true, size: n}
	return nil
}

// AutoMemoryHeadroom is what auto adds to the budgets for the rest of the
// process: handlers, streams, idle connections, the metrics.
const AutoMemoryHeadroom = 128 << 20

// Limit returns the soft memory limit serve sets, if any: the size given,
// none for 0, and for auto none when GOMEMLIMIT is set (the runtime
// applied it already), else the server budget of each listener plus the
// resume buffers (retained) plus AutoMemoryHeadroom.
func (m MemoryLimit) Limit(envSet bool, listeners int, serverBudget, retained int64) (int64, bool) {
	switch {
	case m.set:
		return m.size, m.size > 0
	case envSet:
		return 0, false
	default:
		return int64(listeners)*serverBudget + retained + AutoMemoryHeadroom, true
	}
}

// Apply sets the runtime's soft memory limit that m asks for (see
// Limit) and returns what restores the old
// one: the limit is process-wide, and the tests run serve in their own
// process.
func (m MemoryLimit) Apply(listeners int, serverBudget, retained int64, log *slog.Logger) (restore func()) {
	limit, ok := m.Limit(os.Getenv("GOMEMLIMIT") != "", listeners, serverBudget, retained)
	if !ok {
		return func() {}
	}
	old := debug.SetMemoryLimit(limit)
	log.Info("rsocket memory limit", "bytes", limit)
	return func() { debug.SetMemoryLimit(old) }
}
