package spool

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/internal/agent/deadletter"
	"github.com/sluicehq/sluice/internal/cliflag"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/dirlock"
)

// PrintDeadLetters writes the dead-letter log of the spool in dir (see
// SetAside) to w: one line per message (its id, when it was set aside,
// the refusal's code, its records and bytes, the refusal's detail), or
// with records the messages' records, one per line, as `sluice produce`
// reads them. A message it cannot read is named on errw and counted in
// unreadable. dec decodes the bodies (it must hold the agent's
// dictionary for messages compressed with one). It only reads: it runs
// beside the agent.
func PrintDeadLetters(w, errw io.Writer, dir string, records bool, dec *codec.Decoder) (letters, unreadable int, err error) {
	agentID, err := ReadAgentID(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("%s is no agent spool: %w", dir, err)
	}
	if dec == nil {
		dec = codec.NewDecoder(defaults.MaxMessage)
	}
	out := bufio.NewWriter(w)
	err = deadletter.ReadUnique(filepath.Join(dir, deadletter.Dir), func(l deadletter.Letter) error {
		letters++
		m, err := Decode(l.Record)
		if err != nil {
			unreadable++
			fmt.Fprintf(errw, "message %d: the letter holds no spooled message: %v\n", l.ID, err)
			return nil
		}
		if !records {
			_, err := fmt.Fprintf(out, "message %d\tset aside %s\t%s\t%s, %s\t%s\n", l.ID, l.At.UTC().Format(time.RFC3339),
				l.Code, cliflag.Plural(m.Records, "record"), defaults.FormatSize(int64(len(m.Body))), l.Detail)
			return err
		}
		if err := Records(m, agentID, l.ID, dec, func(rec []byte) error {
			out.Write(rec)
			return out.WriteByte('\n')
		}); err != nil {
			unreadable++
			fmt.Fprintf(errw, "message %d: its records cannot be read (%s): %v\n", l.ID, l.Code, err)
		}
		return nil
	})
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	return letters, unreadable, err
}

// ClearDeadLetters removes the dead-letter log of the spool in dir, once
// its messages were sent again or are not wanted, and returns how many
// messages it held. It takes the spool's lock, so it refuses while the
// agent runs (a *dirlock.BusyError): the agent may be appending.
func ClearDeadLetters(dir string) (letters int, err error) {
	if _, err := ReadAgentID(dir); err != nil {
		return 0, fmt.Errorf("%s is no agent spool: %w", dir, err)
	}
	lock, err := dirlock.Acquire(dir, "spool")
	if err != nil {
		return 0, err
	}
	defer lock.Release()
	dl := filepath.Join(dir, deadletter.Dir)
	// A damaged log is removed all the same, as asked; the count is what
	// could be read of it.
	_ = deadletter.ReadUnique(dl, func(deadletter.Letter) error { letters++; return nil })
	return letters, os.RemoveAll(dl)
}
