package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/bench"
	"github.com/sluicehq/sluice/internal/dirlock"
	"github.com/sluicehq/sluice/internal/lab/logbench"
	"github.com/sluicehq/sluice/internal/storedmsg"
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
	loc, err := findLog(given)
	if err != nil {
		return &exitError{code: 1, msg: err.Error()}
	}
	if loc.dir != given {
		fmt.Fprintf(stdout, "%s: checking the %s log in %s\n", given, loc.what, loc.dir)
	}
	check := seglog.Check
	if *repair {
		// Repair rewrites segments: a running daemon appending to them
		// would corrupt them again, so it takes the daemon's own lock.
		lock, err := dirlock.Acquire(loc.owner, loc.what)
		if err != nil {
			return &exitError{code: 1, msg: fmt.Sprintf("%v; stop it before repairing", err)}
		}
		defer lock.Release()
		check = seglog.Repair
	} else if held, pid := dirlock.Held(loc.owner); held {
		// A read-only check is safe beside the daemon; say what it may see.
		fmt.Fprintf(stdout, "note: %s is in use by a running sluice process (pid %d); checking the live log read-only\n", loc.owner, pid)
	}
	var recs recordCounter
	rep, err := check(loc.dir, seglog.WithCheckVisitor(recs.visit))
	if err != nil {
		return err
	}
	// A log record is one message: a batch of the records consume counts,
	// their number in the message's header.
	fmt.Fprintf(stdout, "%s: %s, %s%s, %s, offsets [%d, %d)\n",
		loc.dir, plural(rep.Segments, "segment"), plural(rep.Records, "message"), recs.String(), plural(rep.Bytes, "byte"), rep.First, rep.Next)
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

// recordCounter adds up the records inside the messages log check reads:
// a sink's store holds storedmsg records, an agent's spool spool records,
// each with its record count in the header.
type recordCounter struct {
	records uint64
	last    uint64
	seen    bool
	unknown bool // a message in neither format: the total is not known
}

func (c *recordCounter) visit(off uint64, body []byte) {
	if c.seen && off <= c.last { // the check started over
		*c = recordCounter{}
	}
	c.seen, c.last = true, off
	if m, err := storedmsg.Decode(body); err == nil {
		c.records += uint64(m.RecordCount)
	} else if r, err := spool.Decode(body); err == nil {
		c.records += uint64(r.Records)
	} else {
		c.unknown = true
	}
}

// String is " (N records)", or nothing when a message was in neither
// format or there were none.
func (c *recordCounter) String() string {
	if c.unknown || !c.seen {
		return ""
	}
	return " (" + plural(c.records, "record") + ")"
}

// summary is rep.Summary() with the log's records named messages, as in
// the check's first line.
func summary(rep *seglog.Report) string {
	return strings.Replace(rep.Summary(), fmt.Sprintf("kept %d records", rep.Records), "kept "+plural(rep.Records, "message"), 1)
}

// logLocation is a log directory found from what the user named, and the
// directory whose lock the daemon using it holds.
type logLocation struct {
	dir   string // the log itself (holds the segments)
	owner string // the directory a daemon locks: spool or data dir
	what  string // "spool", "data" or "log", for the lock's messages
}

// findLog finds the log in dir: dir itself if it holds segments, else the
// log of an agent spool (DIR/log) or of a sink data directory (DIR/store).
// A directory with no log is an error, never an empty "ok".
func findLog(dir string) (logLocation, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return logLocation{}, err
	}
	if !st.IsDir() {
		return logLocation{}, fmt.Errorf("%s is not a directory", dir)
	}
	roles := map[string]string{"log": "spool", "store": "data"}
	if hasSegments(dir) {
		loc := logLocation{dir: dir, owner: dir, what: "log"}
		parent := filepath.Dir(filepath.Clean(dir))
		if what, ok := roles[filepath.Base(filepath.Clean(dir))]; ok {
			if _, err := os.Stat(filepath.Join(parent, dirlock.FileName)); err == nil {
				loc.owner, loc.what = parent, what
			}
		}
		return loc, nil
	}
	for _, sub := range []string{"log", "store"} {
		if p := filepath.Join(dir, sub); hasSegments(p) {
			return logLocation{dir: p, owner: dir, what: roles[sub]}, nil
		}
	}
	return logLocation{}, fmt.Errorf("no log in %s: no segment files there, nor in %s (an agent's --spool) or %s (a sink's --data)",
		dir, filepath.Join(dir, "log"), filepath.Join(dir, "store"))
}

// hasSegments reports whether dir holds at least one segment file.
func hasSegments(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if n := e.Name(); len(n) == 24 && strings.HasSuffix(n, ".seg") && e.Type().IsRegular() {
			return true
		}
	}
	return false
}
