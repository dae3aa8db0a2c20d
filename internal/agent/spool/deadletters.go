package spool

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/internal/agent/deadletter"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/dirlock"
)

// PrintDeadLetters writes the dead-letter log of the spool in dir (see
// SetAside) to w: one line per message (its id, when it was set aside,
// the refusal's code, its records and bytes, the refusal's detail), or
// with records the messages' records, one per line, as `sluice produce`
// reads them. The intact letters of damaged logs the agent moved aside
// are listed too, first, and errw names those logs. A message it cannot
// read is named on errw and counted in unreadable. dec decodes the bodies (it must hold the agent's
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
	damaged, err := deadletter.ReadSpool(dir, func(l deadletter.Letter) error {
		letters++
		m, err := Decode(l.Record)
		if err != nil {
			unreadable++
			fmt.Fprintf(errw, "message %d: the letter holds no spooled message: %v\n", l.ID, err)
			return nil
		}
		if !records {
			_, err := fmt.Fprintf(out, "message %d\tset aside %s\t%s\t%s, %s\t%s\n", l.ID, l.At.UTC().Format(time.RFC3339),
				l.Code, defaults.Plural(m.Records, "record"), defaults.FormatSize(int64(len(m.Body))), l.Detail)
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
	for _, d := range damaged {
		fmt.Fprintf(errw, "%s: a damaged dead-letter log the agent moved aside; its intact letters are listed with the rest, and `sluice dead-letter clear` removes it too\n", d)
	}
	return letters, unreadable, err
}

// ClearDeadLetters removes the dead-letter log of the spool in dir, and
// the damaged ones the agent moved aside (whose intact letters
// PrintDeadLetters lists with the rest), once its messages were sent
// again or are not wanted, and returns how many messages they held and
// how many damaged logs went. It takes the spool's lock, so it refuses
// while the agent runs (a *dirlock.BusyError): the agent may be
// appending.
func ClearDeadLetters(dir string) (letters, damaged int, err error) {
	if _, err := ReadAgentID(dir); err != nil {
		return 0, 0, fmt.Errorf("%s is no agent spool: %w", dir, err)
	}
	lock, err := dirlock.Acquire(dir, "spool")
	if err != nil {
		return 0, 0, err
	}
	defer lock.Release()
	// A damaged log is removed all the same, as asked; the count is what
	// could be read of it.
	dirs, _ := deadletter.ReadSpool(dir, func(deadletter.Letter) error { letters++; return nil })
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return letters, damaged, err
		}
		damaged++
	}
	return letters, damaged, os.RemoveAll(filepath.Join(dir, deadletter.Dir))
}

// ClearedLine is what `sluice dead-letter clear` says of what
// ClearDeadLetters removed.
func ClearedLine(letters, damaged int) string {
	s := "removed " + defaults.Plural(letters, "dead letter")
	if damaged > 0 {
		s += fmt.Sprintf(" (with %s moved aside)", defaults.Plural(damaged, "damaged log"))
	}
	return s
}
