// Package logbench is `sluice log bench` over --reps: bench.LogBench run
// once per rep, the record sizes in alternating order, with one table and
// one --json report over all reps.
package logbench

import (
	"fmt"
	"io"
	"slices"

	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/benchkit"
)

// Run runs cfg report.Reps times and prints (and with a JSON path
// writes) the results.
func Run(cfg bench.LogConfig, report benchkit.Report, stdout io.Writer) error {
	var rs bench.Results
	sizes := cfg.RecordSizes
	for rep := 0; rep < report.Reps; rep++ {
		c := cfg
		c.RecordSizes = slices.Clone(sizes)
		if rep%2 == 1 {
			slices.Reverse(c.RecordSizes)
		}
		if report.Reps > 1 && c.Progress != nil {
			fmt.Fprintf(c.Progress, "[rep %d/%d]\n", rep+1, report.Reps)
		}
		res, err := bench.LogBench(c)
		if err != nil {
			return err
		}
		// Rows in the order of the flag, whatever order this rep ran in.
		for _, size := range sizes {
			for _, r := range res {
				if r.RecordSize == size {
					rs.Add(r.Name(), r.Params(), r.Metrics())
				}
			}
		}
	}
	fmt.Fprintf(stdout, "\n%s\n\n", benchkit.RepsLine(report.Reps))
	bench.PrintLogRepsTable(stdout, rs)
	fmt.Fprintln(stdout, "\nraw = plain os.File writes of the same bytes with the same number of writes and fdatasyncs.")
	return report.Write(map[string]any{"duration_s": cfg.Duration.Seconds(), "max_bytes": cfg.MaxBytes}, rs, nil)
}
