package diskstore

import (
	"bytes"
	"crypto/sha256"
	"fmt"
)

// A partial's sidecar holds the SHA-256 state of its bytes up to the
// durable offset, so that a resumed upload goes on hashing where it
// stopped instead of reading the file again. That trusts the bytes on
// disk: a partial damaged at rest (a flipped bit, a file changed while
// the server was down) would then be finished with the hash of what was
// received and the damaged bytes in the file, the one thing a checksummed
// transfer must never do. So the first writer after a restart reads the
// partial back once and compares its hash state with the sidecar's; on a
// mismatch the upload starts again from zero (the client still has the
// file) and the damage is logged. Only uploads loaded at a restart are
// read back, once: a partial written by this process is in the page
// cache it wrote.

// verifyIdle is verifyAtRest for an upload asked about (a tus HEAD, a
// gRPC or RSocket offset request) before any writer took it since the
// restart, so the offset answered is one the upload will go on from. An
// upload being written was checked by its writer; one that cannot be
// checked now is left to its next writer.
func (s *Uploads) verifyIdle(u *Upload) {
	u.mu.Lock()
	need := u.unverified
	u.mu.Unlock()
	if !need {
		return
	}
	s.mu.Lock()
	if u.active || s.byName[u.name] != u {
		s.mu.Unlock()
		return
	}
	u.takeLocked()
	if err := u.reopen(); err != nil {
		u.untakeLocked()
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	if err := u.verifyAtRest(); err != nil {
		s.log.Warn("reading back a partial upload failed; its next writer tries again", "name", u.name, "err", err)
	}
	u.Release()
}

// verified checks, for a taken upload, what verifyAtRest checks, outside
// the store's lock; on an I/O error it releases u.
func verified(u *Upload, err error) (*Upload, error) {
	if err != nil {
		return nil, err
	}
	if err := u.verifyAtRest(); err != nil {
		u.Release()
		return nil, err
	}
	return u, nil
}

// verifyAtRest reads the partial's durable bytes back once after a
// restart and restarts the upload from zero when their SHA-256 state
// differs from the sidecar's. The caller has taken u.
func (u *Upload) verifyAtRest() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.unverified || u.done {
		return nil
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for off := int64(0); off < u.rec.Offset; {
		n := int(min(int64(len(buf)), u.rec.Offset-off))
		got, err := u.data.ReadAt(buf[:n], off)
		if got < n {
			if err == nil {
				err = fmt.Errorf("short read")
			}
			return fmt.Errorf("reading back the partial upload %s at %d: %w", u.rec.Name, off, err)
		}
		h.Write(buf[:n])
		off += int64(n)
	}
	st, err := marshalHash(h)
	if err != nil {
		return err
	}
	u.unverified = false
	if bytes.Equal(st, u.rec.Hash) {
		return nil
	}
	u.s.log.Error("a partial upload's bytes changed on disk since they were received (damage at rest); it starts again from zero",
		"name", u.rec.Name, "id", u.rec.ID, "offset", u.rec.Offset)
	u.s.Stats.Salvaged.Add(1)
	if err := u.resetLocked(); err != nil {
		return fmt.Errorf("restarting the damaged partial upload %s: %w", u.rec.Name, err)
	}
	return nil
}
