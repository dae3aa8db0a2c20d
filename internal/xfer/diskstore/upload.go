package diskstore

import (
	"bytes"
	"container/list"
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
	"time"

	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/seglog"
)

// Upload is one partial upload. Its writer (the one that got it from
// Begin or Acquire) appends with Write or ReadFrom, ends with Finish or
// Remove, and Releases it.
type Upload struct {
	s *Uploads
	// name is rec.Name, never changed: read without u.mu by a request
	// that waits for the writer (Acquire), while the writer may be
	// assigning rec under u.mu.
	name   string
	active bool // guarded by s.mu
	// released is closed when the writer Releases; interrupt, if the
	// writer set one (OnTakeover), asks it to stop. Guarded by s.mu.
	released  chan struct{}
	interrupt func()

	mu        sync.Mutex
	rec       record // the durable state (what the sidecar holds)
	data      seglog.File
	meta      sidecar
	hash      hash.Hash // SHA-256 of data[:written] once the hasher is drained
	written   int64     // bytes accepted (verified; the last ones maybe still in cur); >= rec.Offset
	cur       []byte    // accepted bytes not yet written, ending at written
	curLim    int       // cur is written when it holds this many bytes (the next block boundary)
	sinceSync int64
	done      bool // completed or removed
	hp        hashPipe
	// resumed: the upload went on from an offset it had reached before,
	// after a server restart (recover), a new Begin of the same name or a
	// takeover of a frozen writer. Guarded by s.mu.
	resumed bool
	// unverified: the partial's bytes were loaded from disk after a
	// restart and not yet checked against the sidecar's hash state
	// (verifyAtRest). Guarded by mu.
	unverified bool
	// idleAt is u's place in s.idle while no one writes it (bound.go).
	// Guarded by s.mu.
	idleAt *list.Element
}

// The receiving goroutine gathers chunks into blocks that end on
// blockSize boundaries of the file, writes each with one pwrite and hands
// it to a hashing goroutine: SHA-256 (about 1.5 GB/s here) would
// otherwise bound the whole path, and on another core it runs alongside
// the next block's receive, CRC32C and write. nBlocks bounds how far the
// hasher may lag, and so one upload's blocks; the store's buffer budget
// (Options.BufferBytes) bounds the blocks of all its uploads together.
// An upload that finds the budget spent goes on without blocks: each
// chunk (or 64 KiB of a body) written and hashed before the next is read.
const (
	blockSize = 1 << 20
	nBlocks   = 4
)

// hashPipe is the hashing goroutine of one upload. Only the writer (who
// holds u.mu) starts and drains it; u.hash is the hasher's while it runs.
type hashPipe struct {
	in   chan hashItem // what to hash, in file order; nil when no hasher runs
	done chan struct{} // closed when the hasher has hashed all of in
	// lag holds one token per block of this upload out (cur, a block
	// being read into, blocks queued for or in the hasher): at most
	// nBlocks. The hasher gives a block's token back once it hashed it.
	lag chan struct{}
}

// block returns an empty block from the store's budget, waiting for the
// hasher to finish one when nBlocks are out; false when the budget is
// spent (the caller writes unbuffered, see writeDirect). It never waits
// for other uploads: a handler waiting for a block reads nothing, so its
// body's idle deadline (set per read) does not run and it does not see
// its client reset, and bodies that trickle would hold every block while
// the other uploads waited (TestSpentBudgetDoesNotWait). Caller holds
// u.mu.
func (u *Upload) block() ([]byte, bool) {
	hp := &u.hp
	if hp.lag == nil {
		hp.lag = make(chan struct{}, nBlocks)
	}
	hp.lag <- struct{}{} // at most nBlocks out; the hasher frees one
	b, ok := u.s.bufs.tryGet()
	if !ok {
		<-hp.lag
	}
	return b, ok
}

// writeDirect writes p at written and hashes it, without a block (the
// budget is spent): the hasher is drained first, so the hash stays in
// file order. It does not count p in the Stats (the caller did). Caller
// holds u.mu; cur is empty.
func (u *Upload) writeDirect(p []byte) error {
	u.drainHash()
	if _, err := u.data.WriteAt(p, u.written); err != nil {
		return u.failWrite(err)
	}
	u.hash.Write(p)
	u.written += int64(len(p))
	u.s.Stats.BufferMisses.Add(1)
	return nil
}

// putBlock gives b, one of this upload's blocks, back to the budget.
func (u *Upload) putBlock(b []byte) {
	u.s.bufs.put(b)
	<-u.hp.lag
}

// dropCur discards the accepted bytes not yet written.
func (u *Upload) dropCur() {
	if u.cur != nil {
		u.putBlock(u.cur)
		u.cur = nil
	}
}

// hashItem is what the hasher takes: bytes p to hash, then, when block is
// not nil, that block to give back to the budget (with its lag token).
type hashItem struct {
	p, block []byte
}

// bodyPiece is how much of a block a body (ReadFrom) reads before it
// hands those bytes to the hasher: the hasher then works on a block while
// the rest of it arrives, and at the body's end it has at most a piece
// left to hash, not a whole block. A tus PATCH waits for that rest
// before its answer (the checkpoint holds the hash state): at 1 MiB
// PATCHes, a block's SHA-256 was about 0.5 ms of each 1.4 ms PATCH.
const bodyPiece = 128 << 10

// hashAsync hands a written block to the hasher, starting it if needed.
// The hasher gives the block back to the budget once hashed.
func (u *Upload) hashAsync(b []byte) { u.toHasher(hashItem{p: b, block: b}) }

// toHasher hands it to the hasher, starting it if needed. Caller holds
// u.mu.
func (u *Upload) toHasher(it hashItem) {
	hp := &u.hp
	if hp.in == nil {
		hp.in, hp.done = make(chan hashItem, nBlocks*blockSize/bodyPiece), make(chan struct{})
		go func(h hash.Hash, in <-chan hashItem, lag <-chan struct{}, bufs *bufferBudget, done chan<- struct{}) {
			for it := range in {
				h.Write(it.p)
				if it.block != nil {
					bufs.put(it.block)
					<-lag
				}
			}
			close(done)
		}(u.hash, hp.in, hp.lag, u.s.bufs, hp.done)
	}
	hp.in <- it
}

// drainHash waits until every written block is hashed: u.hash then
// covers data[:written-len(cur)].
func (u *Upload) drainHash() {
	hp := &u.hp
	if hp.in != nil {
		close(hp.in)
		<-hp.done
		hp.in, hp.done = nil, nil
	}
}

// putBlocks gives back the upload's blocks between writers (a tus upload
// may idle for hours): after a checkpoint only a removed upload still
// has accepted bytes in cur.
func (u *Upload) putBlocks() {
	u.drainHash()
	if len(u.cur) == 0 || u.done {
		u.dropCur()
	}
}

// xfer.Info describes the upload; Offset is the durable offset.
func (u *Upload) Info() xfer.Info {
	u.s.mu.Lock()
	active := u.active
	u.s.mu.Unlock()
	u.mu.Lock()
	defer u.mu.Unlock()
	in := xfer.Info{ID: u.rec.ID, Name: u.rec.Name, Size: u.rec.Size, Offset: u.rec.Offset, Meta: u.rec.Meta,
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
	d, err := u.s.o.FS.OpenFile(dataPath, flag, 0o644)
	if err != nil {
		return err
	}
	m, err := u.s.o.FS.OpenFile(metaPath, flag, 0o644)
	if err != nil {
		d.Close()
		return err
	}
	u.data, u.meta.f = d, m
	return nil
}

// reopen opens the files of a partial that its last writer closed
// (Release): only an upload being written holds descriptors, so clients
// that create uploads and vanish, in any number, cannot run the process
// out of them (before: two descriptors per partial until it expired; a
// tus client resetting in a loop left 14,758 open in 20 s, the ulimit
// was 20,000). Under s.mu, with u just taken.
func (u *Upload) reopen() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.data != nil || u.done {
		return nil
	}
	if u.hash == nil { // slimmed while idle
		if err := u.restoreHash(); err != nil {
			return fmt.Errorf("restoring the SHA-256 state of %s: %w", u.rec.Name, err)
		}
	}
	return u.openFiles(false)
}

// untakeLocked undoes takeLocked when the taker cannot write after all.
// Under s.mu.
func (u *Upload) untakeLocked() {
	u.active, u.interrupt = false, nil
	close(u.released)
	u.released = nil
	u.s.markIdleLocked(u)
}

func (u *Upload) closeFiles() {
	u.drainHash()
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
	u.s.o.FS.Remove(metaPath) // first: a data file without a sidecar is cleaned at Open
	u.s.o.FS.Remove(dataPath)
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
				err = u.s.o.FS.SyncDir(u.s.partial)
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
	u.drainHash()
	u.dropCur()
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

// classify marks a full disk as xfer.ErrNoSpace.
func classify(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %v", xfer.ErrNoSpace, err)
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
	if err := u.appendChecked(off, [][]byte{p}, len(p), crc); err != nil {
		return u.written, err
	}
	err := u.maybeCheckpoint() // before reading written: a failed checkpoint rolls it back
	return u.written, err
}

// WritePieces is Write of a chunk given in pieces (xfer.PieceWriter):
// their CRC32C is checked across them before any byte is kept, and they
// are copied into the upload's blocks, the only copy the store makes
// (appendChecked).
func (u *Upload) WritePieces(off int64, pieces [][]byte, crc uint32) (int64, error) {
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := u.check(off, int64(n)); err != nil {
		return u.written, err
	}
	if err := u.appendChecked(off, pieces, n, crc); err != nil {
		return u.written, err
	}
	err := u.maybeCheckpoint() // before reading written: a failed checkpoint rolls it back
	return u.written, err
}

// maybeCheckpoint checkpoints after SyncEvery bytes or SyncInterval.
// Caller holds u.mu.
func (u *Upload) maybeCheckpoint() error {
	if u.sinceSync >= u.s.o.SyncEvery || u.s.o.Now().Sub(u.rec.Updated) >= u.s.o.SyncInterval {
		return u.checkpointLocked()
	}
	return nil
}

func (u *Upload) check(off, n int64) error {
	if u.done || u.data == nil {
		return xfer.ErrNotFound
	}
	if off != u.written {
		return &xfer.OffsetError{Want: off, Have: u.written}
	}
	if u.written+n > u.rec.Size {
		return fmt.Errorf("%w: %d bytes at offset %d, the size is %d", xfer.ErrOverSize, n, off, u.rec.Size)
	}
	return nil
}

// appendChecked appends a chunk given in pieces (n bytes, CRC32C crc,
// at off = written) once its CRC is checked; a chunk with a bad CRC
// leaves nothing: no byte in the file, the hash, the block or the
// offset. Where the chunk fits in the current block (always, for chunks
// that divide blockSize, as every size the upload loop picks does), it is
// copied into the block's free tail and checked there
// (xfer.CopyVerified: cheaper than checking the chunk where it lies,
// then copying it), and only a good chunk is counted in: len(cur) and
// written move past it. The copied bytes of a bad chunk lie beyond
// len(cur), so the pwrite and the hasher never see them and the next
// chunk overwrites them. A chunk that crosses a block boundary, or
// finds the budget spent, is checked where it lies, then copied (a
// block is written and hashed once full, so its bytes must be good
// first). Caller holds u.mu and checked off and n (check).
func (u *Upload) appendChecked(off int64, pieces [][]byte, n int, crc uint32) error {
	if u.cur == nil {
		if b, ok := u.block(); ok {
			u.cur, u.curLim = b, blockSize-int(u.written%blockSize)
		}
	}
	if u.cur == nil || n > u.curLim-len(u.cur) {
		if err := xfer.VerifyPieces(&u.s.Stats, off, pieces, n, crc); err != nil {
			u.dropEmptyCur()
			return err
		}
		for _, p := range pieces {
			if err := u.append(p); err != nil {
				return err // back at the last checkpoint (failWrite)
			}
		}
		return nil
	}
	at := len(u.cur)
	if err := xfer.CopyVerified(&u.s.Stats, off, u.cur[at:at+n], pieces, n, crc); err != nil {
		u.dropEmptyCur()
		return err
	}
	u.s.Stats.BytesReceived.Add(int64(n))
	u.sinceSync += int64(n)
	u.cur = u.cur[:at+n]
	u.written += int64(n)
	if len(u.cur) == u.curLim {
		return u.flush()
	}
	return nil
}

// dropEmptyCur gives back a block that holds no accepted byte, taken for
// a chunk that was refused: an idle upload holds no block (slim).
func (u *Upload) dropEmptyCur() {
	if u.cur != nil && len(u.cur) == 0 {
		u.dropCur()
	}
}

// append adds p after written, through blocks (see blockSize). A failed
// write returns the upload to its last checkpoint (see failWrite).
func (u *Upload) append(p []byte) error {
	u.s.Stats.BytesReceived.Add(int64(len(p)))
	u.sinceSync += int64(len(p))
	for len(p) > 0 {
		if u.cur == nil {
			b, ok := u.block()
			if !ok {
				return u.writeDirect(p)
			}
			u.cur = b
			u.curLim = blockSize - int(u.written%blockSize)
		}
		n := copy(u.cur[len(u.cur):u.curLim], p)
		u.cur = u.cur[:len(u.cur)+n]
		u.written += int64(n)
		p = p[n:]
		if len(u.cur) == u.curLim {
			if err := u.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// appendBlock adds b, a block from u.block() that cur is empty for, after
// written without copying it; the upload owns b from then on.
func (u *Upload) appendBlock(b []byte) error {
	if len(u.cur) > 0 {
		err := u.append(b)
		u.putBlock(b)
		return err
	}
	u.dropCur()
	u.s.Stats.BytesReceived.Add(int64(len(b)))
	u.sinceSync += int64(len(b))
	u.written += int64(len(b))
	u.cur = b
	return u.flush()
}

// appendHashedBlock adds b, a block from u.block() whose bytes the caller
// already handed to the hasher piece by piece (ReadFrom), after written:
// one pwrite, then the block goes back to the budget once the hasher is
// past it. cur is empty. A failed write returns the upload to its last
// checkpoint (failWrite), which drains the hasher first.
func (u *Upload) appendHashedBlock(b []byte) error {
	u.s.Stats.BytesReceived.Add(int64(len(b)))
	u.sinceSync += int64(len(b))
	_, err := u.data.WriteAt(b, u.written)
	u.written += int64(len(b))
	u.toHasher(hashItem{block: b})
	if err != nil {
		return u.failWrite(err)
	}
	return nil
}

// flush writes cur and hands it to the hasher.
func (u *Upload) flush() error {
	if len(u.cur) == 0 {
		return nil
	}
	if _, err := u.data.WriteAt(u.cur, u.written-int64(len(u.cur))); err != nil {
		return u.failWrite(err)
	}
	u.hashAsync(u.cur)
	u.cur = nil
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
	u.drainHash()
	u.dropCur()
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
	if err := u.flush(); err != nil { // so that a rollback drops only this body
		u.mu.Unlock()
		return u.written, err
	}
	u.drainHash()
	start := u.written
	snap, _ := marshalHash(u.hash)
	u.mu.Unlock()
	rollback := func() {
		u.drainHash()
		u.dropCur()
		u.data.Truncate(start)
		u.written = start
		h := sha256.New()
		h.(encoding.BinaryUnmarshaler).UnmarshalBinary(snap)
		u.hash = h
	}
	// The body is read straight into blocks that end on block boundaries
	// of the file: one pwrite each, no copy.
	var rerr error
	for {
		u.mu.Lock()
		if u.done || u.data == nil {
			u.mu.Unlock()
			return start, xfer.ErrNotFound
		}
		lim := blockSize - int(u.written%blockSize)
		b, buffered := u.block()
		u.mu.Unlock()
		var stage *[]byte
		if !buffered {
			// The budget is spent: 64 KiB at a time, each written and
			// hashed before the next is read.
			stage = stagePool.Get().(*[]byte)
			b = (*stage)[:min(len(*stage), lim)]
			lim = len(b)
		}
		var n int
		var err error
		pieces := false
		if buffered && lastBlock(r, lim) {
			// In pieces, each hashed (on the hasher) as soon as it is
			// read, so that at the body's end the hasher has at most a
			// piece left; cur is empty (flushed above, and after every
			// block).
			for n < lim && err == nil {
				var m int
				m, err = io.ReadFull(r, b[n:min(n+bodyPiece, lim)])
				if m > 0 {
					if sum != nil {
						sum.Write(b[n : n+m])
					}
					u.mu.Lock()
					u.toHasher(hashItem{p: b[n : n+m]})
					u.mu.Unlock()
					n += m
				}
			}
			pieces = true
		} else {
			n, err = io.ReadFull(r, b[:lim])
			if n > 0 && sum != nil {
				sum.Write(b[:n])
			}
		}
		if n > 0 {
			u.mu.Lock()
			if err := u.check(u.written, int64(n)); err != nil {
				rollback() // drains the hasher, which may be reading b
				u.release(b, stage)
				u.mu.Unlock()
				return start, err
			}
			var werr error
			if pieces {
				werr = u.appendHashedBlock(b[:n])
			} else if buffered {
				werr = u.appendBlock(b[:n])
			} else {
				u.s.Stats.BytesReceived.Add(int64(n))
				u.sinceSync += int64(n)
				werr = u.writeDirect(b[:n])
				stagePool.Put(stage)
			}
			if werr != nil {
				// it went back to the last checkpoint
				w := u.written
				u.mu.Unlock()
				return w, werr
			}
			u.mu.Unlock()
		} else {
			u.mu.Lock()
			u.release(b, stage)
			u.mu.Unlock()
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
		return start, fmt.Errorf("%w: the body of %d bytes at offset %d", xfer.ErrChecksum, u.written-start, start)
	}
	if err := u.checkpointLocked(); err != nil {
		return u.written, err
	}
	return u.written, rerr
}

// lastBlock tells whether the body r will end within the next lim bytes,
// when r knows its length (an HTTP body with a Content-Length: a tus
// PATCH, a POST). Only that block is handed to the hasher piece by piece:
// the earlier ones are hashed while the next arrives anyway, and each
// piece may wake the hasher (a body of 128 MiB in pieces cost the POST
// about a tenth more CPU per GB).
func lastBlock(r io.Reader, lim int) bool {
	s, ok := r.(interface{ Remaining() (int64, bool) })
	if !ok {
		return false
	}
	left, known := s.Remaining()
	return known && left <= int64(lim)
}

// stagePool holds the 64 KiB buffers a body is read into when the
// budget has no block for it (ReadFrom).
var stagePool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// release gives back what ReadFrom read into: a block (stage nil) or a
// stage buffer. Caller holds u.mu.
func (u *Upload) release(b []byte, stage *[]byte) {
	if stage != nil {
		stagePool.Put(stage)
		return
	}
	u.putBlock(b)
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
	u.drainHash()
	r := u.rec
	r.Offset = u.written
	r.Updated = u.s.o.Now()
	r.Seq++
	st, err := marshalHash(u.hash)
	if err == nil {
		r.Hash = st
		// The data first: the sidecar must never claim bytes that are not
		// on disk.
		if err = u.data.Datasync(); err == nil {
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
// returns the SHA-256. via names the transport for the log line that says
// the file landed.
func (u *Upload) Finish(clientSHA []byte, via string) ([]byte, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done || u.data == nil {
		return nil, xfer.ErrNotFound
	}
	if u.written != u.rec.Size {
		return nil, fmt.Errorf("%w: %d of %d bytes", xfer.ErrIncomplete, u.written, u.rec.Size)
	}
	if mutationRenameBeforeFsync {
		if err := u.flush(); err != nil {
			return nil, err
		}
		u.drainHash()
	} else if err := u.checkpointLocked(); err != nil {
		return nil, err
	}
	sum := u.hash.Sum(nil)
	for _, want := range [][]byte{u.rec.SHA256, clientSHA} {
		if want != nil && !bytes.Equal(want, sum) && !mutationSkipSHA256 {
			u.s.Stats.UploadsFailed.Add(1)
			u.removeFiles()
			u.s.forget(u)
			return nil, fmt.Errorf("%w: SHA-256 of %s is %s, the client's is %s; the partial upload was discarded",
				xfer.ErrChecksum, u.rec.Name, hex.EncodeToString(sum), hex.EncodeToString(want))
		}
	}
	dataPath, metaPath := u.s.paths(u.rec.ID)
	final := filepath.Join(u.s.dir, u.rec.Name)
	if err := u.s.o.FS.Rename(dataPath, final); err != nil {
		if derr := u.s.notADirectory(u.rec.Name); derr != nil {
			// The same answer every time: the client stops (bad_name)
			// instead of sending the end again for a minute.
			u.s.log.Warn("an upload cannot land: its name is a directory", "name", u.rec.Name, "dir", u.s.dir)
			return nil, derr
		}
		return nil, fmt.Errorf("moving the upload into place: %w", err)
	}
	if mutationRenameBeforeFsync {
		u.data.Datasync()
	}
	if err := u.s.o.FS.SyncDir(u.s.dir); err != nil {
		return nil, fmt.Errorf("syncing %s: %w", u.s.dir, err)
	}
	u.closeFiles()
	if u.rec.Keep {
		// Before the sidecar goes: a crash leaves one or the other.
		u.s.keepFinished(&u.rec, sum)
	}
	u.s.o.FS.Remove(metaPath)
	u.s.o.FS.SyncDir(u.s.partial)
	u.done = true
	u.s.mu.Lock()
	resumed := u.resumed
	u.s.mu.Unlock()
	u.s.forget(u)
	u.s.Stats.UploadsCompleted.Add(1)
	u.s.log.Info("file landed", "name", u.rec.Name, "size", u.rec.Size, "sha256", hex.EncodeToString(sum),
		"via", via, "duration", u.s.o.Now().Sub(u.rec.Created).Round(time.Millisecond), "resumed", resumed)
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
// takeLocked makes the caller the upload's writer. Under s.mu.
func (u *Upload) takeLocked() {
	u.active, u.released, u.interrupt = true, make(chan struct{}), nil
	u.s.markBusyLocked(u)
}

// OnTakeover sets how to stop this writer when a newer request wants the
// upload (Acquire): f must make the writer's reads fail soon, after which
// the writer Releases as usual. f may be called from any goroutine.
func (u *Upload) OnTakeover(f func()) {
	u.s.mu.Lock()
	u.interrupt = f
	u.s.mu.Unlock()
}

func (u *Upload) Release() {
	u.mu.Lock()
	if !u.done && u.written != u.rec.Offset {
		if err := u.checkpointLocked(); err != nil {
			u.s.log.Warn("saving a partial upload's progress failed", "name", u.rec.Name, "err", err)
		}
	}
	u.putBlocks()
	if !u.done {
		u.closeFiles() // the next writer reopens them (reopen)
		u.slim()
	}
	u.mu.Unlock()
	u.s.bufs.trim()
	u.s.mu.Lock()
	u.active, u.interrupt = false, nil
	close(u.released)
	u.released = nil      // a waiter took it before; the next writer makes its own
	u.s.markIdleLocked(u) // not when it completed or was removed: then it is no longer indexed
	u.s.mu.Unlock()
}

// slim drops what an idle partial does not need and its next writer
// rebuilds (reopen): the SHA-256 state, whose copy is in the record, and
// the hasher's token channel. A tus client resetting in a loop leaves a
// partial a round, kept until --expire for its client to resume: 100 such
// clients left about 30,000 in 35 s (issue 23), and these made up about
// half of each one's heap (BenchmarkIdlePartialHeap: 765 bytes and 7
// objects before). Only a clean idle partial is slimmed: after a failed
// checkpoint the hash covers bytes the record does not. Caller holds u.mu,
// the files closed.
func (u *Upload) slim() {
	if u.written != u.rec.Offset || u.cur != nil || u.hp.in != nil || len(u.hp.lag) > 0 {
		return
	}
	u.hash = nil
	u.hp.lag = nil
}
