package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/bench"
	"github.com/sluicehq/sluice/internal/dirlock"
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
	given := fs.Arg(0)
	loc, err := logcheck.Find(given)
	if err != nil {
		return &exitError{code: 1, msg: err.Error()}
	}
	if loc.Dir != given {
		fmt.Fprintf(stdout, "%s: checking the %s log in %s\n", given, loc.What, loc.Dir)
	}
	check := seglog.Check
	if *repair {
		// Repair rewrites segments: a running daemon appending to them
		// would corrupt them again, so it takes the daemon's own lock.
		lock, err := dirlock.Acquire(loc.Owner, loc.What)
		if err != nil {
			return &exitError{code: 1, msg: fmt.Sprintf("%v; stop it before repairing", err)}
		}
		defer lock.Release()
		check = seglog.Repair
	} else if held, pid := dirlock.Held(loc.Owner); held {
		// A read-only check is safe beside the daemon; say what it may see.
		fmt.Fprintf(stdout, "note: %s is in use by a running sluice process (pid %d); checking the live log read-only\n", loc.Owner, pid)
	}
	var recs logcheck.RecordCounter
	rep, err := check(loc.Dir, seglog.WithCheckVisitor(recs.Visit))
	if err != nil {
		return err
	}
	// A log record is one message: a batch of the records consume counts,
	// their number in the message's header.
	fmt.Fprintf(stdout, "%s: %s, %s%s, %s, offsets [%d, %d)\n",
		loc.Dir, plural(rep.Segments, "segment"), plural(rep.Records, "message"), recordsNote(&recs), plural(rep.Bytes, "byte"), rep.First, rep.Next)
	if rep.Gaps > 0 {
		fmt.Fprintf(stdout, "%s no message (lost to damage)\n", plural(rep.Gaps, "offset holds", "offsets hold"))
	}
	torn := 0
	for _, p := range rep.Problems {
		fmt.Fprintln(stdout, "problem:", p)
		if p.Torn {
			torn++
		}
	}
	for _, q := range rep.Recovered {
		fmt.Fprintln(stdout, "quarantined:", q)
	}
	switch {
	case len(rep.Problems) == 0:
		fmt.Fprintln(stdout, "ok")
		return nil
	case *repair:
		fmt.Fprintln(stdout, summary(rep))
		fmt.Fprintf(stdout, "repaired: %s; the log now holds offsets [%d, %d)\n", plural(len(rep.Problems), "problem"), rep.First, rep.Next)
		return nil
	case torn == len(rep.Problems):
		// A torn final record is what a crash mid-append leaves (or, in a
		// live log, an append in progress); Open truncates it by itself.
		fmt.Fprintln(stdout, "ok: only a torn final record, which the next open truncates")
		return nil
	default:
		fmt.Fprintln(stdout, "repair would give:", summary(rep))
		return &exitError{code: 1, msg: fmt.Sprintf("%s found; stop the daemon and run `sluice log check --repair %s` to quarantine the damage", plural(len(rep.Problems), "problem"), given)}
	}
}

// summary is rep.Summary() with the log's records named messages, as in
// the check's first line.
func summary(rep *seglog.Report) string {
	return strings.Replace(rep.Summary(), fmt.Sprintf("kept %d records", rep.Records), "kept "+plural(rep.Records, "message"), 1)
}

// recordsNote is " (N records)", or nothing when the count is not known.
func recordsNote(c *logcheck.RecordCounter) string {
	n, known := c.Records()
	if !known {
		return ""
	}
	return " (" + plural(n, "record") + ")"
}
