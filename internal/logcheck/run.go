package logcheck

import (
	"fmt"
	"io"
	"strings"

	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/dirlock"
	"github.com/sluicehq/sluice/seglog"
)

// Run is `sluice log check [--repair] DIR`: it finds the log behind
// given, checks (or with repair, repairs: the daemon's lock held) every
// record, and reports on w. An error is exit 1: a log with problems left
// in it, as one that cannot be checked.
func Run(w io.Writer, given string, repair bool) error {
	loc, err := Find(given)
	if err != nil {
		return err
	}
	if loc.Dir != given {
		fmt.Fprintf(w, "%s: checking the %s log in %s\n", given, loc.What, loc.Dir)
	}
	check := seglog.Check
	if repair {
		// Repair rewrites segments: a running daemon appending to them
		// would corrupt them again, so it takes the daemon's own lock.
		lock, err := dirlock.Acquire(loc.Owner, loc.What)
		if err != nil {
			return fmt.Errorf("%v; stop it before repairing", err)
		}
		defer lock.Release()
		check = seglog.Repair
	} else if held, pid := dirlock.Held(loc.Owner); held {
		// A read-only check is safe beside the daemon; say what it may see.
		fmt.Fprintf(w, "note: %s is in use by a running sluice process (pid %d); checking the live log read-only\n", loc.Owner, pid)
	}
	var recs RecordCounter
	rep, err := check(loc.Dir, seglog.WithCheckVisitor(recs.Visit))
	if err != nil {
		return err
	}
	// A log record is one message: a batch of the records consume counts,
	// their number in the message's header.
	fmt.Fprintf(w, "%s: %s, %s%s, %s, offsets [%d, %d)\n",
		loc.Dir, defaults.Plural(rep.Segments, "segment"), defaults.Plural(rep.Records, "message"), recordsNote(&recs), defaults.Plural(rep.Bytes, "byte"), rep.First, rep.Next)
	if rep.Gaps > 0 {
		fmt.Fprintf(w, "%s no message (gaps: records taken out for damage, or ids skipped after a stop that was not clean under --spool-sync interval or none)\n", defaults.Plural(rep.Gaps, "offset holds", "offsets hold"))
	}
	torn, damaged := 0, 0
	for _, p := range rep.Problems {
		fmt.Fprintln(w, "problem:", p)
		if p.Torn {
			torn++
		}
		if p.Damaged {
			damaged++
		}
	}
	for _, q := range rep.Recovered {
		fmt.Fprintln(w, "quarantined:", q)
	}
	switch {
	case len(rep.Problems) == 0:
		fmt.Fprintln(w, "ok")
		return nil
	case repair:
		fmt.Fprintln(w, summary(rep))
		fmt.Fprintf(w, "repaired: %s; the log now holds offsets [%d, %d)\n", defaults.Plural(len(rep.Problems), "problem"), rep.First, rep.Next)
		return nil
	case torn == len(rep.Problems) && damaged > 0:
		// Damaged after it was written whole: Open keeps its bytes in
		// the quarantine and goes on without it, as a repair would.
		fmt.Fprintln(w, "ok: only a damaged final record, which the next open copies to the quarantine and cuts off (its message is lost)")
		return nil
	case torn == len(rep.Problems):
		// A torn final record is what a crash mid-append leaves (or, in a
		// live log, an append in progress); Open truncates it by itself.
		fmt.Fprintln(w, "ok: only a torn final record, which the next open truncates")
		return nil
	default:
		fmt.Fprintln(w, "repair would give:", summary(rep))
		return fmt.Errorf("%s found; stop the daemon and run `sluice log check --repair %s` to quarantine the damage", defaults.Plural(len(rep.Problems), "problem"), given)
	}
}

// summary is rep.Summary() with the log's records named messages, as in
// the check's first line.
func summary(rep *seglog.Report) string {
	return strings.Replace(rep.Summary(), fmt.Sprintf("kept %d records", rep.Records), "kept "+defaults.Plural(rep.Records, "message"), 1)
}

// recordsNote is " (N records)", or nothing when the count is not known.
func recordsNote(c *RecordCounter) string {
	n, known := c.Records()
	if !known {
		return ""
	}
	return " (" + defaults.Plural(n, "record") + ")"
}
