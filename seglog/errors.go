package seglog

import (
	"errors"
	"fmt"
	"path/filepath"
)

var (
	// ErrClosed is returned by operations on a closed Log.
	ErrClosed = errors.New("seglog: log closed")
	// ErrRecordTooLarge is returned by Append for a record over the limit.
	ErrRecordTooLarge = errors.New("seglog: record too large")
	// ErrBroken is wrapped by every Append after an fdatasync failed: what
	// the kernel holds for the file can no longer be trusted, so the log
	// must be reopened (which re-reads what is really on disk).
	ErrBroken = errors.New("seglog: log unusable after a failed sync; reopen it")
	// ErrTruncated is returned when reading below the first offset still in
	// the log: those segments were removed.
	ErrTruncated = errors.New("seglog: offset below the first retained offset")
	// ErrCorrupt is wrapped by every *CorruptionError.
	ErrCorrupt = errors.New("seglog: corrupt log")
)

// CorruptionError reports damaged data that is not a torn final write: the
// file, the byte position of the bad record inside it, and what is wrong.
type CorruptionError struct {
	File   string // path of the segment
	Pos    int64  // byte position of the bad record in the file
	Offset uint64 // record offset expected at Pos
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("seglog: corrupt record in %s at byte %d (expected offset %d): %s", e.File, e.Pos, e.Offset, e.Reason)
}

// RepairAdvice names the damage in the log at dir and the one command that
// goes on from it, for the daemons that refuse to start on it (the agent's
// spool, the sink's store): "segment S, byte N: REASON.", then the
// `sluice log check --repair` line with dir made absolute, on a line of
// its own so that it can be copied.
func (e *CorruptionError) RepairAdvice(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return fmt.Sprintf("segment %s, byte %d: %s.\nStop here and run\n\tsluice log check --repair %s\n"+
		"which moves the damage to %s and keeps every readable record at its offset",
		e.File, e.Pos, e.Reason, dir, filepath.Join(dir, "quarantine"))
}

// Unwrap lets errors.Is(err, ErrCorrupt) match.
func (e *CorruptionError) Unwrap() error { return ErrCorrupt }

// IsCorrupt reports whether err is, or wraps, a *CorruptionError and
// returns it, so a caller can name the damaged file and position and point
// the operator at `sluice log check --repair`.
func IsCorrupt(err error) (*CorruptionError, bool) {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		return ce, true
	}
	return nil, false
}

// WriteError reports a failed write; the log undid it and stays usable.
type WriteError struct {
	File string
	Err  error
}

func (e *WriteError) Error() string { return fmt.Sprintf("seglog: write %s: %v", e.File, e.Err) }
func (e *WriteError) Unwrap() error { return e.Err }
