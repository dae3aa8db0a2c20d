// Package benchkit holds what the `sluice bench` runners share and
// nothing else: the --reps/--json report a run writes, the line that says
// where and how often it ran, percent cells for the tables, and the
// fixed-size metric records the delivery and ingest runs send. Each
// benchmark's own runner and report live in a package of their own.
package benchkit

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/metricsgen"
)

// Report is where a bench command's results go besides its tables: the
// command and arguments it ran with, its --reps and its --json file
// ("" writes none).
type Report struct {
	Command  string
	Args     []string
	Reps     int
	JSONPath string
}

// Write writes the --json file, if asked for: every run's parameters and
// results, their medians, and the machine.
func (r Report) Write(params map[string]any, rs bench.Results, notes []string) error {
	return bench.Report{Command: r.Command, Args: r.Args, Reps: r.Reps, Params: params, Machine: bench.CurrentMachine(),
		Rows: rs.Rows, Notes: notes}.WriteJSONFile(r.JSONPath)
}

// RepsLine says on what (Go, GOMAXPROCS, date, revision) and, with more
// than one rep, how the figures below it were taken.
func RepsLine(reps int) string {
	m := bench.CurrentMachine()
	s := fmt.Sprintf("%s, GOMAXPROCS %d, %s, %s", m.GoVersion, m.GOMAXPROCS, m.Date.Format("2006-01-02 15:04 UTC"), ShortRev(m.GitRevision))
	if reps > 1 {
		s = fmt.Sprintf("%d reps per configuration, in alternating order; cells: median (min–max). %s", reps, s)
	}
	return s
}

// ShortRev shortens a git revision to 12 digits, keeping "-dirty".
func ShortRev(r string) string {
	if r == "" {
		return "revision unknown"
	}
	if len(r) > 12 {
		d := ""
		if strings.HasSuffix(r, "-dirty") {
			d = "-dirty"
		}
		return r[:12] + d
	}
	return r
}

// Pct prints a ratio as a percentage with its spread.
func Pct(s bench.Stat) string {
	if s.N == 0 {
		return ""
	}
	s.Median, s.Min, s.Max = 100*s.Median, 100*s.Min, 100*s.Max
	if s.N == 1 {
		return fmt.Sprintf("%.0f%%", s.Median)
	}
	return fmt.Sprintf("%.0f%% (%.0f–%.0f%%)", s.Median, s.Min, s.Max)
}

// Pct1 is Pct with one decimal, for shares of a few percent.
func Pct1(s bench.Stat) string {
	if s.N == 0 {
		return ""
	}
	if s.N == 1 {
		return fmt.Sprintf("%.1f%%", 100*s.Median)
	}
	return fmt.Sprintf("%.1f%% (%.1f–%.1f%%)", 100*s.Median, 100*s.Min, 100*s.Max)
}

// FixedSizeSource yields realistic metric lines cut or padded to size,
// about one message's worth per call, so that every run of a comparison
// sends the same records.
func FixedSizeSource(size, message int) func(int) bench.Source {
	return func(feeder int) bench.Source {
		g, err := metricsgen.New(metricsgen.Config{Seed: int64(feeder + 1)})
		if err != nil {
			panic(err) // fixed valid config
		}
		per := max(1, message/size/4)
		arena := make([]byte, 0, per*size)
		var line []byte
		return func(dst [][]byte) [][]byte {
			arena = arena[:0]
			for i := 0; i < per; i++ {
				line = g.AppendRecord(line[:0])
				for len(line) < size {
					line = append(line, ' ')
				}
				start := len(arena)
				arena = append(arena, line[:size]...)
				dst = append(dst, arena[start:start+size])
			}
			return dst
		}
	}
}

// StartCPUProfile writes a CPU profile to path until the returned
// function is called; an empty path profiles nothing. Runners call it
// themselves so that the profile covers the runs, not the set-up.
func StartCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
