// Package logcheck is `sluice log check`: it finds the log behind a
// directory a user names (a log, an agent's spool, a sink's data
// directory) with the directory whose lock its daemon holds, checks or
// repairs it, counts the records inside its messages, and reports.
package logcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/dirlock"
	"github.com/sluicehq/sluice/internal/storedmsg"
)

// RecordCounter adds up the records inside the messages log check reads:
// a sink's store holds storedmsg records, an agent's spool spool records,
// each with its record count in the header.
type RecordCounter struct {
	records uint64
	last    uint64
	seen    bool
	unknown bool // a message in neither format: the total is not known
}

// Visit is a seglog.WithCheckVisitor visitor.
func (c *RecordCounter) Visit(off uint64, body []byte) {
	if c.seen && off <= c.last { // the check started over
		*c = RecordCounter{}
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

// Records is the records counted; known is false when a message was in
// neither format or there were none.
func (c *RecordCounter) Records() (n uint64, known bool) {
	return c.records, c.seen && !c.unknown
}

// Location is a log directory found from what the user named, and the
// directory whose lock the daemon using it holds.
type Location struct {
	Dir   string // the log itself (holds the segments)
	Owner string // the directory a daemon locks: spool or data dir
	What  string // "spool", "data" or "log", for the lock's messages
}

// Find finds the log in dir: dir itself if it holds segments, else the
// log of an agent spool (DIR/log) or of a sink data directory (DIR/store).
// A directory with no log is an error, never an empty "ok".
func Find(dir string) (Location, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return Location{}, err
	}
	if !st.IsDir() {
		return Location{}, fmt.Errorf("%s is not a directory", dir)
	}
	roles := map[string]string{"log": "spool", "store": "data"}
	if hasSegments(dir) {
		loc := Location{Dir: dir, Owner: dir, What: "log"}
		parent := filepath.Dir(filepath.Clean(dir))
		if what, ok := roles[filepath.Base(filepath.Clean(dir))]; ok {
			if _, err := os.Stat(filepath.Join(parent, dirlock.FileName)); err == nil {
				loc.Owner, loc.What = parent, what
			}
		}
		return loc, nil
	}
	for _, sub := range []string{"log", "store"} {
		if p := filepath.Join(dir, sub); hasSegments(p) {
			return Location{Dir: p, Owner: dir, What: roles[sub]}, nil
		}
	}
	return Location{}, fmt.Errorf("no log in %s: no segment files there, nor in %s (an agent's --spool) or %s (a sink's --data)",
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
