package spool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/seglog"
)

// The spool bounds the message ids it has sent under its agent id, in
// the file sent-below: every id sent, or about to be, is below the bound,
// which is made durable before an id at or above it goes out, in steps of
// defaults.SpoolIDReservation. The agent's Hello carries it
// (Hello.SentBelow), so that a sink holding an id at or above it under
// this agent id knows another spool numbered and sent that id and
// refuses the session, instead of taking this spool's messages with
// those ids for that spool's (already stored) ones and dropping them.
//
// The file is two fixed slots overwritten in place, the newer valid one
// read: a new bound needs no new disk block, since on a full disk sending
// (to have messages acknowledged and their room freed) is the way out, and
// a torn write leaves the other slot.
const (
	sentFile = "sent-below"
	// A slot: the bound, a sequence number choosing the newer slot, and a
	// CRC-32C of both (seeded, so that zeroed slots are not valid).
	sentSlotLen = 16
	sentCRCSeed = 0x5e47b10c
)

var sentCRCTable = crc32.MakeTable(crc32.Castagnoli)

func sentSlot(below uint64, seq uint32) []byte {
	b := binary.LittleEndian.AppendUint64(make([]byte, 0, sentSlotLen), below)
	b = binary.LittleEndian.AppendUint32(b, seq)
	return binary.LittleEndian.AppendUint32(b, crc32.Update(sentCRCSeed, sentCRCTable, b))
}

func parseSentSlot(b []byte) (below uint64, seq uint32, ok bool) {
	if len(b) != sentSlotLen || crc32.Update(sentCRCSeed, sentCRCTable, b[:12]) != binary.LittleEndian.Uint32(b[12:]) {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint32(b[8:]), true
}

// loadSent reads the bound at Open and keeps the file open for
// ReserveSent. A spool created now has sent nothing (bound 0, known); a
// spool that holds messages but no readable bound (from before it, or
// damaged) sends none in its Hello until ReserveSent writes one.
func (s *Spool) loadSent(fresh bool) {
	path := filepath.Join(s.dir, sentFile)
	b, err := os.ReadFile(path)
	if err == nil {
		var seq uint32
		for i := 0; i+sentSlotLen <= len(b) && i < 2*sentSlotLen; i += sentSlotLen {
			if below, q, ok := parseSentSlot(b[i : i+sentSlotLen]); ok && (!s.sentKnown || q > seq) {
				s.sentBelow, seq, s.sentKnown, s.sentSlot = below, q, true, i/sentSlotLen
			}
		}
		s.sentSeq = seq
		if !s.sentKnown {
			s.warnings = append(s.warnings, fmt.Sprintf("the %s file holds no valid bound (%d bytes); one is written before the next send", sentFile, len(b)))
		}
		return
	}
	switch {
	case errors.Is(err, os.ErrNotExist) && fresh:
		s.sentBelow, s.sentKnown = 0, true
	case !errors.Is(err, os.ErrNotExist):
		s.warnings = append(s.warnings, fmt.Sprintf("the %s file cannot be read (%v); a new one is written before the next send", sentFile, err))
	}
}

// SentBelow is the durable bound on the ids this spool has sent: every id
// sent under the spool's agent id is below it. known is false for a spool
// that has sent messages without keeping the bound (before it existed, or
// its file damaged or never written for want of space), until
// ReserveSent writes one.
func (s *Spool) SentBelow() (below uint64, known bool) {
	s.sentMu.Lock()
	defer s.sentMu.Unlock()
	return s.sentBelow, s.sentKnown
}

// ReserveSent makes the durable bound cover id before the caller sends it:
// past the bound, it writes a new one defaults.SpoolIDReservation ids
// beyond both id and every id the log ever gave (which also covers what
// was sent while the bound was unknown). When it cannot be written (no
// room on the disk for a new file, or a filesystem that copies on write;
// something else at its path), the file is removed and the bound is
// unknown, so id may go (a Hello without a bound is not checked):
// sending, to have messages acknowledged and their room freed, is the way
// out of a full disk, and must not wedge on the bound. It is tried again
// a step later. Only when the file cannot be removed either must id not
// be sent.
func (s *Spool) ReserveSent(id uint64) error {
	s.sentMu.Lock()
	defer s.sentMu.Unlock()
	if s.sentKnown && id < s.sentBelow || !s.sentKnown && id < s.sentRetryAt {
		return nil
	}
	below := max(id+1, s.seg.NextOffset()) + defaults.SpoolIDReservation
	if mutationNoSentBound {
		below = id // the bound does not cover the id sent
	}
	err := s.writeSent(below)
	if err == nil {
		s.sentBelow, s.sentKnown = below, true
		return nil
	}
	// A bound left on disk below the ids now sent would have a restart
	// refused: remove it (on a full disk that frees room rather than
	// taking any). With none left, a Hello carries none, so id may go.
	if s.sentF != nil {
		s.sentF.Close()
		s.sentF = nil
	}
	if rerr := os.Remove(filepath.Join(s.dir, sentFile)); rerr == nil || errors.Is(rerr, os.ErrNotExist) {
		if !IsNoSpace(err) && s.logger != nil {
			s.logger.Warn("agent: cannot write the bound on sent message ids; going on without it, tried again later", "err", err)
		}
		s.sentKnown, s.sentRetryAt = false, below
		return nil
	}
	return fmt.Errorf("agent: persisting the bound on sent message ids: %w", err)
}

// writeSent writes below into the older slot, in place, and syncs it; the
// file is made (two slots) when it does not exist.
func (s *Spool) writeSent(below uint64) error {
	if s.sentF == nil {
		f, err := os.OpenFile(filepath.Join(s.dir, sentFile), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		if st, err := f.Stat(); err != nil || st.Size() < 2*sentSlotLen {
			if err == nil {
				_, err = f.WriteAt(make([]byte, 2*sentSlotLen), 0)
			}
			if err == nil {
				err = f.Sync()
			}
			if err == nil {
				err = seglog.SyncDir(s.dir)
			}
			if err != nil {
				f.Close()
				return err
			}
		}
		s.sentF = f
	}
	slot, seq := 1-s.sentSlot, s.sentSeq+1
	if !s.sentKnown {
		slot = 0
	}
	if _, err := s.sentF.WriteAt(sentSlot(below, seq), int64(slot*sentSlotLen)); err != nil {
		return err
	}
	if err := s.sentF.Sync(); err != nil {
		return err
	}
	s.sentSlot, s.sentSeq = slot, seq
	return nil
}

// closeSent closes the bound's file (Close).
func (s *Spool) closeSent() error {
	s.sentMu.Lock()
	defer s.sentMu.Unlock()
	if s.sentF == nil {
		return nil
	}
	err := s.sentF.Close()
	s.sentF = nil
	return err
}

// resetSent records that the spool has sent nothing under its agent id:
// for a spool that takes a new id (OpenChangingID).
func resetSent(dir string) error {
	path := filepath.Join(dir, sentFile)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	b := append(sentSlot(0, 1), make([]byte, sentSlotLen)...)
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = seglog.SyncDir(dir)
	}
	return err
}
