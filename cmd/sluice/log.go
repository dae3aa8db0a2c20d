package main

import (
	"io"
	"time"

	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/logbench"
	"github.com/sluicehq/sluice/internal/logcheck"
	"github.com/sluicehq/sluice/seglog"
)

func init() {
	register("log bench", "measure log appends beside raw file writes + fdatasync", logBench)
	register("log check", "verify every record of a log, a spool or a data directory (--repair to fix)", logCheck)
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
	bf := addBenchFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := bf.check(); err != nil {
		return err
	}
	pol, err := seglog.ParseSyncPolicy(*syncFlag)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	if *writers < 1 || *dur <= 0 {
		return &exitError{code: 2, msg: "--writers and --duration must be positive"}
	}
	return logbench.Run(bench.LogConfig{
		Dir: *dir, RecordSizes: sizes, Sync: pol, Writers: *writers,
		Duration: *dur, MaxBytes: int64(maxBytes), Progress: stderr,
	}, bf.report("log bench", args), stdout)
}

func logCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("log check", "[--repair] DIR", stderr)
	repair := fs.Bool("repair", false, "move damaged bytes to LOG/quarantine/ and keep every intact record (needs the daemon stopped)")
	if err := parseFlagsArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError(fs, "give one DIR: the log's directory, or the daemon's --data or --spool")
	}
	return logcheck.Run(stdout, fs.Arg(0), *repair)
}
