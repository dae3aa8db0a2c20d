package seglog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
)

// ReservationFile is the metadata file (WriteMeta's format) in which a log
// opened WithOffsetReservation keeps the offset below which it has handed
// out, or may have handed out, offsets.
const ReservationFile = "offsets-reserved"

// Under SyncInterval and SyncNone a record is visible to readers (and a
// caller may pass its offset on: a message id a sink stores, a position a
// consumer passed) before it is durable, and a machine crash loses the
// unsynced tail. Without a reservation the log would give those offsets
// to the next records after the restart. With one, the log persists,
// before it publishes any offset at or above the reservation, a new
// reservation step offsets further on (one small fsynced file per step),
// and Open, finding the log shorter than the reservation, writes a gap
// frame up to it: no offset is ever given twice. A clean Close syncs and
// then lowers the reservation to the end of the log, so a clean restart
// skips nothing; after a crash the skipped offsets
// are the unsynced records lost (if the machine crashed) and offsets never
// used. Under SyncAlways nothing is reserved (an offset is published only
// once durable), but a reservation left by an earlier run is honoured.

// readReservation returns the persisted reservation; 0 when there is none.
func (l *Log) readReservation() (uint64, error) {
	b, err := readMeta(l.cfg.fs, l.dir, ReservationFile)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err == nil && len(b) != 8 {
		err = fmt.Errorf("%w: %s holds %d bytes, want 8", ErrMetaCorrupt, ReservationFile, len(b))
	}
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (l *Log) writeReservation(r uint64) error {
	return writeMeta(l.cfg.fs, l.dir, ReservationFile, binary.LittleEndian.AppendUint64(nil, r))
}

// skipReserved runs at Open: a log shorter than its reservation goes on
// after it, behind a durable gap frame. A damaged reservation file (outside
// damage: it is replaced atomically) leaves the reservation unknown; the
// log then skips two steps and says so: a guess, as the lost tail of a
// machine crash may have held more.
func (l *Log) skipReserved() error {
	l.reserved = 0
	r, err := l.readReservation()
	if err != nil {
		r = l.next + 2*l.cfg.reserveStep
		l.cfg.logger.Error("seglog: the offset reservation is unreadable; skipping two reservation steps so that no offset is given twice",
			"dir", l.dir, "err", err, "skip_to", r)
	}
	l.reserved = r
	if mutationIgnoreReservation || r <= l.next {
		return nil
	}
	tail := l.segs[len(l.segs)-1]
	gap := appendGap(nil, l.next, r-l.next)
	if _, err := tail.f.WriteAt(gap, tail.size); err != nil {
		return fmt.Errorf("seglog: skip reserved offsets in %s: %w", tail.path, err)
	}
	if err := tail.f.Datasync(); err != nil {
		return fmt.Errorf("seglog: skip reserved offsets in %s: %w", tail.path, err)
	}
	l.skipFrom, l.skipTo = l.next, r
	tail.size += int64(len(gap))
	tail.next = r
	l.next, l.durable = r, r
	l.tailSize = tail.size
	l.cfg.logger.Info("seglog: the log ends before its reserved offsets (the last run did not close cleanly); "+
		"they are skipped so that none is given twice",
		"dir", l.dir, "from", l.skipFrom, "to", r)
	return nil
}

// SkippedAtOpen returns the offsets [from, to) that Open skipped because
// an earlier run had reserved them (WithOffsetReservation); from == to
// when it skipped none. Records among them that an earlier run published
// were lost with the unsynced tail of a machine crash.
func (l *Log) SkippedAtOpen() (from, to uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.skipFrom, l.skipTo
}
