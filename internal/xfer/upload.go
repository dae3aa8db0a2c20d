package xfer

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/sluicehq/sluice/seglog"
)

// Upload is one partial upload. Its writer (the one that got it from
// Begin or Acquire) appends with Write or ReadFrom, ends with Finish or
// Remove, and Releases it.
type Upload struct {
	s      *Store
	active bool // guarded by s.mu

	mu        sync.Mutex
	rec       record // the durable state (what the sidecar holds)
	data      *os.File
	meta      sidecar
	hash      hash.Hash // SHA-256 of data[:written]
	written   int64     // bytes accepted (verified; the last ones maybe still in wbuf); >= rec.Offset
	wbuf      []byte    // accepted small chunks not yet written, ending at written
	sinceSync int64
	done      bool // completed or removed
}

// Info describes the upload; Offset is the durable offset.
func (u *Upload) Info() Info {
	u.s.mu.Lock()
	active := u.active
	u.s.mu.Unlock()
	u.mu.Lock()
	defer u.mu.Unlock()
	in := Info{ID: u.rec.ID, Name: u.rec.Name, Size: u.rec.Size, Offset: u.rec.Offset, Meta: u.rec.Meta,
		SHA256: u.rec.SHA256, Created: u.rec.Created, Updated: u.rec.Updated, Active: active}
	if e := u.s.o.Expire; e > 0 {
		in.Expires = u.rec.Updated.Add(e)
	}
	return in
}

// Offset is the next byte the writer must send.
func (u *Upload) Offset() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.written
}

func (u *Upload) openFiles(create bool) error {
	dataPath, metaPath := u.s.paths(u.rec.ID)
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE | os.O_EXCL
	}
	d, err := os.OpenFile(dataPath, flag, 0o644)
	if err != nil {
		return err
	}
	m, err := os.OpenFile(metaPath, flag, 0o644)
	if err != nil {
		d.Close()
		return err
	}
	u.data, u.meta.f = d, m
	return nil
}

func (u *Upload) closeFiles() {
	if u.data != nil {
		u.data.Close()
		u.data = nil
	}
	if u.meta.f != nil {
		u.meta.f.Close()
		u.meta.f = nil
	}
}

// removeFiles deletes the partial's files. Caller holds u.mu.
func (u *Upload) removeFiles() {
	u.closeFiles()
	dataPath, metaPath := u.s.paths(u.rec.ID)
	os.Remove(metaPath) // first: a data file without a sidecar is cleaned at Open
	os.Remove(dataPath)
	u.done = true
}

// create makes the partial's files, both sidecar slots written so that
// later saves overwrite allocated blocks (a full disk cannot fail them).
func (u *Upload) create() error {
	if err := u.openFiles(true); err != nil {
		return err
	}
	u.hash = sha256.New()
	st, err := marshalHash(u.hash)
	if err == nil {
		u.rec.Hash = st
		r := u.rec
		if err = u.meta.save(&r); err == nil {
			r.Seq = 1
			if err = u.meta.save(&r); err == nil {
				u.rec.Seq = 1
				err = seglog.SyncDir(u.s.partial)
			}
		}
	}
	if err != nil {
		u.removeFiles()
		return fmt.Errorf("creating partial upload: %w", classify(err))
	}
	return nil
}

func marshalHash(h hash.Hash) ([]byte, error) {
	return h.(encoding.BinaryMarshaler).MarshalBinary()
}

func (u *Upload) restoreHash() error {
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(u.rec.Hash); err != nil {
		return err
	}
	u.hash = h
	return nil
}

// resetLocked restarts the upload from zero.
func (u *Upload) resetLocked() error {
	if err := u.data.Truncate(0); err != nil {
		return err
	}
	u.hash = sha256.New()
	st, _ := marshalHash(u.hash)
	r := u.rec
	r.Offset, r.Hash, r.Seq = 0, st, r.Seq+1
	if err := u.meta.save(&r); err != nil {
		return err
	}
	u.rec, u.written, u.sinceSync = r, 0, 0
	return nil
}

// classify marks a full disk as ErrNoSpace.
func classify(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %v", ErrNoSpace, err)
	}
	return err
}

// Write appends one chunk at off whose CRC32C is crc. A chunk with a bad
// CRC, at the wrong offset or past the size is refused with nothing
// written. It returns the new offset.
func (u *Upload) Write(off int64, p []byte, crc uint32) (int64, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := u.check(off, int64(len(p))); err != nil {
		return u.written, err
	}
	if CRC32C(p) != crc {
		u.s.Stats.ChunksRejected.Add(1)
		return u.written, fmt.Errorf("%w: CRC32C of the %d-byte chunk at offset %d", ErrChecksum, len(p), off)
	}
	if err := u.append(p); err != nil {
		return u.written, err
	}
	if u.sinceSync >= u.s.o.SyncEvery || u.s.o.Now().Sub(u.rec.Updated) >= u.s.o.SyncInterval {
		if err := u.checkpointLocked(); err != nil {
			return u.written, err
		}
	}
	return u.written, nil
}

func (u *Upload) check(off, n int64) error {
	if u.done || u.data == nil {
		return ErrNotFound
	}
	if off != u.written {
		return &OffsetError{Want: off, Have: u.written}
	}
	if u.written+n > u.rec.Size {
		return fmt.Errorf("%w: %d bytes at offset %d, the size is %d", ErrOverSize, n, off, u.rec.Size)
	}
	return nil
}

// writeBuf gathers small chunks so that a sweep of 16-byte chunks costs
// one pwrite per 256 KiB, not one per chunk.
const writeBuf = 256 << 10

// append adds p after written: small chunks gather in wbuf, large ones
// are written at once. A failed write returns the upload to its last
// checkpoint (see failWrite).
func (u *Upload) append(p []byte) error {
	big := len(p) >= writeBuf/2
	if big || len(u.wbuf)+len(p) > writeBuf {
		if err := u.flush(); err != nil {
			return err
		}
	}
	if big {
		if _, err := u.data.WriteAt(p, u.written); err != nil {
			return u.failWrite(err)
		}
	} else {
		if u.wbuf == nil {
			u.wbuf = make([]byte, 0, writeBuf)
		}
		u.wbuf = append(u.wbuf, p...)
	}
	u.hash.Write(p)
	u.written += int64(len(p))
	u.sinceSync += int64(len(p))
	u.s.Stats.BytesReceived.Add(int64(len(p)))
	return nil
}

// flush writes the gathered small chunks.
func (u *Upload) flush() error {
	if len(u.wbuf) == 0 {
		return nil
	}
	if _, err := u.data.WriteAt(u.wbuf, u.written-int64(len(u.wbuf))); err != nil {
		return u.failWrite(err)
	}
	u.wbuf = u.wbuf[:0]
	return nil
}

// failWrite returns the upload to its last checkpoint: which of the bytes
// after it reached the disk is unknown after a failed write.
func (u *Upload) failWrite(err error) error {
	at := u.written
	u.rollbackDurable()
	return fmt.Errorf("writing at offset %d: %w", at, classify(err))
}

func (u *Upload) rollbackDurable() {
	u.wbuf = u.wbuf[:0]
	u.data.Truncate(u.rec.Offset)
	u.written = u.rec.Offset
	u.restoreHash()
	u.sinceSync = 0
}

// ReadFrom appends what r gives at off until EOF (a tus PATCH body). With
// sum (a fresh hash of the body) and want, a body whose hash differs is
// refused and nothing of it is kept; without them, the bytes received
// before a read error are kept. The new offset is durable on return.
func (u *Upload) ReadFrom(off int64, r io.Reader, sum hash.Hash, want []byte) (int64, error) {
	u.mu.Lock()
	if err := u.check(off, 0); err != nil {
		u.mu.Unlock()
		return off, err
	}
	if err := u.flush(); err != nil { // so that wbuf holds only this body
		u.mu.Unlock()
		return u.written, err
	}
	start := u.written
	snap, _ := marshalHash(u.hash)
	u.mu.Unlock()
	rollback := func() {
		u.wbuf = u.wbuf[:0]
		u.data.Truncate(start)
		u.written = start
		h := sha256.New()
		h.(encoding.BinaryUnmarshaler).UnmarshalBinary(snap)
		u.hash = h
	}
	buf := make([]byte, 256<<10)
	var rerr error
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			u.mu.Lock()
			if err := u.check(u.written, int64(n)); err != nil {
				rollback()
				u.mu.Unlock()
				return start, err
			}
			if err := u.append(buf[:n]); err != nil {
				// append went back to the last checkpoint
				w := u.written
				u.mu.Unlock()
				return w, err
			}
			u.mu.Unlock()
			if sum != nil {
				sum.Write(buf[:n])
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			rerr = err
			break
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if sum != nil && (rerr != nil || !bytes.Equal(sum.Sum(nil), want)) {
		rollback()
		if rerr != nil {
			return start, rerr
		}
		u.s.Stats.ChunksRejected.Add(1)
		return start, fmt.Errorf("%w: the body of %d bytes at offset %d", ErrChecksum, u.written-start, start)
	}
	if err := u.checkpointLocked(); err != nil {
		return u.written, err
	}
	return u.written, rerr
}

// Checkpoint makes the bytes written so far durable and records them in
// the sidecar; Offset and a restarted server then agree.
func (u *Upload) Checkpoint() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.checkpointLocked()
}

func (u *Upload) checkpointLocked() error {
	if u.done || u.data == nil {
		return nil
	}
	if err := u.flush(); err != nil {
		return err
	}
	r := u.rec
	r.Offset = u.written
	r.Updated = u.s.o.Now()
	r.Seq++
	st, err := marshalHash(u.hash)
	if err == nil {
		r.Hash = st
		// The data first: the sidecar must never claim bytes that are not
		// on disk.
		if err = u.data.Sync(); err == nil {
			err = u.meta.save(&r)
		}
	}
	if err != nil {
		// What the sidecar holds is what a restart would resume from; the
		// writer continues from there too.
		u.rollbackDurable()
		return fmt.Errorf("saving the upload's progress: %w", classify(err))
	}
	u.rec = r
	u.sinceSync = 0
	return nil
}

// Finish completes the upload: all Size bytes must be there; their
// SHA-256 must match the one given at Begin and clientSHA (each when not
// nil); then the file is fsynced, renamed to DIR/NAME and DIR fsynced. A
// hash mismatch discards the partial (no byte of it can be trusted). It
// returns the SHA-256.
func (u *Upload) Finish(clientSHA []byte) ([]byte, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done || u.data == nil {
		return nil, ErrNotFound
	}
	if u.written != u.rec.Size {
		return nil, fmt.Errorf("%w: %d of %d bytes", ErrIncomplete, u.written, u.rec.Size)
	}
	if err := u.checkpointLocked(); err != nil {
		return nil, err
	}
	sum := u.hash.Sum(nil)
	for _, want := range [][]byte{u.rec.SHA256, clientSHA} {
		if want != nil && !bytes.Equal(want, sum) {
			u.s.Stats.UploadsFailed.Add(1)
			u.removeFiles()
			u.s.forget(u)
			return nil, fmt.Errorf("%w: SHA-256 of %s is %s, the client's is %s; the partial upload was discarded",
				ErrChecksum, u.rec.Name, hex.EncodeToString(sum), hex.EncodeToString(want))
		}
	}
	dataPath, metaPath := u.s.paths(u.rec.ID)
	final := filepath.Join(u.s.dir, u.rec.Name)
	if err := os.Rename(dataPath, final); err != nil {
		return nil, fmt.Errorf("moving the upload into place: %w", err)
	}
	if err := seglog.SyncDir(u.s.dir); err != nil {
		return nil, fmt.Errorf("syncing %s: %w", u.s.dir, err)
	}
	u.closeFiles()
	os.Remove(metaPath)
	seglog.SyncDir(u.s.partial)
	u.done = true
	u.s.forget(u)
	u.s.Stats.UploadsCompleted.Add(1)
	return sum, nil
}

// Remove terminates the upload and deletes its partial files.
func (u *Upload) Remove() {
	u.mu.Lock()
	u.removeFiles()
	u.mu.Unlock()
	u.s.forget(u)
}

// Release ends this writer's hold, saving its progress first.
func (u *Upload) Release() {
	u.mu.Lock()
	if !u.done && u.written != u.rec.Offset {
		if err := u.checkpointLocked(); err != nil {
			u.s.log.Warn("saving a partial upload's progress failed", "name", u.rec.Name, "err", err)
		}
	}
	u.mu.Unlock()
	u.s.mu.Lock()
	u.active = false
	u.s.mu.Unlock()
}
