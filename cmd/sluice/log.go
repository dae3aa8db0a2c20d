package main

import (
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/internal/bench"
	"github.com/sluicehq/sluice/seglog"
)

func init() {
	register("log bench", "measure log appends beside raw file writes + fdatasync", logBench)
	register("log check", "verify every record of a log directory (--repair to fix)", logCheck)
}

func logBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("log bench", "[flags]", stderr)
	sizes := sizeList{100, 16 << 10, 256 << 10}
	fs.Var(&sizes, "sizes", "record sizes to measure, comma-separated")
	syncFlag := fs.String("sync", "always", "sync policy: always, none, or an interval such as 10ms")
	writers := fs.Int("writers", 8, "concurrent appenders (their appends share fdatasyncs)")
	dur := fs.Duration("duration", 4*time.Second, "log time per record size (split over 4 alternating rounds)")
	maxBytes := byteSize(1 << 30)
	fs.Var(&maxBytes, "max-bytes", "stop a run after this many payload bytes")
	dir := fs.String("dir", "", "directory to write in (default: a temporary directory)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	pol, err := seglog.ParseSyncPolicy(*syncFlag)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	if *writers < 1 || *dur <= 0 {
		return &exitError{code: 2, msg: "--writers and --duration must be positive"}
	}
	res, err := bench.LogBench(bench.LogConfig{
		Dir: *dir, RecordSizes: sizes, Sync: pol, Writers: *writers,
		Duration: *dur, MaxBytes: int64(maxBytes), Progress: stderr,
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	bench.PrintLogResults(stdout, res)
	fmt.Fprintln(stdout, "\nraw = plain os.File writes of the same bytes with the same number of writes and fdatasyncs.")
	return nil
}

func logCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("log check", "[--repair] DIR", stderr)
	repair := fs.Bool("repair", false, "move damaged bytes to DIR/quarantine/ and keep every good record before them")
	if err := parseFlagsArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return &exitError{code: 2}
	}
	dir := fs.Arg(0)
	check := seglog.Check
	if *repair {
		check = seglog.Repair
	}
	rep, err := check(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d segments, %d records, %d bytes, offsets [%d, %d)\n",
		dir, rep.Segments, rep.Records, rep.Bytes, rep.First, rep.Next)
	for _, p := range rep.Problems {
		fmt.Fprintln(stdout, "problem:", p)
	}
	for _, q := range rep.Recovered {
		fmt.Fprintln(stdout, "quarantined:", q)
	}
	switch {
	case len(rep.Problems) == 0:
		fmt.Fprintln(stdout, "ok")
		return nil
	case *repair:
		fmt.Fprintf(stdout, "repaired: %d problems; the log now holds offsets [%d, %d)\n", len(rep.Problems), rep.First, rep.Next)
		return nil
	default:
		return &exitError{code: 1, msg: fmt.Sprintf("%d problems found; run with --repair to quarantine the damage", len(rep.Problems))}
	}
}
