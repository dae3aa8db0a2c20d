package send

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/sluicehq/sluice/internal/xfer"
)

// uploadOnce is one pass of the upload loop: ask the server's offset, begin
// from it (from zero when the server has no upload of this size), send
// the chunks, finish, and check the server's SHA-256 against ours.
func uploadOnce(ctx context.Context, tr xfer.Transport, src io.ReaderAt, size int64, what string, o *Options, reached *bool) ([]byte, error) {
	off, ssize, exists, err := tr.Offset(ctx, o.Name)
	if err != nil {
		return nil, err
	}
	if exists {
		*reached = true // the server knows the upload: from now on a refusal is a restart under it
	}
	from := int64(0)
	if exists && ssize == size && off <= size {
		from = off
	}
	j := &job{src: src, what: what, size: size, from: from, chunk: o.Chunk, o: o}
	if o.SHA256 == nil {
		j.h = sha256.New()
	}
	if err := j.hashPrefix(); err != nil {
		return nil, err
	}
	if from > 0 {
		o.Log.Info("resuming", "offset", from, "size", size)
	}
	if o.Progress != nil {
		o.Progress(from, size)
	}
	st, err := tr.Begin(ctx, xfer.Outgoing{Name: o.Name, Size: size, From: from, SHA256: j.wholeSHA256})
	if err != nil {
		return nil, err
	}
	// The server took the upload (tus: a POST answered; an Offset with no
	// upload known may not have asked it anything).
	*reached = true
	defer st.Close()
	var end int64 // of the last chunk sent
	if err := j.chunks(func(c xfer.Chunk) error { end = c.Off + int64(len(c.Data)); return st.Chunk(c) }); err != nil {
		var pe *xfer.PermanentError
		if errors.As(err, &pe) {
			return nil, err // ours, not the server's
		}
		// tus verifies the file with the PATCH that completes it.
		return nil, givenHashRefuted(o, st.Cause(err), end == size)
	}
	mine := j.sum()
	sum, err := st.Finish(mine)
	if err != nil {
		return nil, givenHashRefuted(o, err, true)
	}
	if string(sum) != string(mine) {
		return nil, xfer.Permanent(fmt.Errorf("the server's SHA-256 %x differs from ours %x", sum, mine))
	}
	return sum, nil
}

// givenHashRefuted makes err permanent when it is the server's checksum
// refusal of the whole file (atEnd: of the request that completed it)
// and the hash was Options.SHA256: sending the same bytes again cannot
// change the server's hash of them. (On tus this also takes a corrupted
// last PATCH for a wrong hash: the server keeps what it had, and the next
// send resumes.)
func givenHashRefuted(o *Options, err error, atEnd bool) error {
	if o.SHA256 == nil || !atEnd || !errors.Is(err, xfer.ErrChecksum) {
		return err
	}
	return xfer.Permanent(fmt.Errorf("%w (the SHA-256 given, --sha256 or Options.SHA256, is not that of what was sent: wrong, or the file changed)", err))
}

// job is one attempt at sending a file from an offset.
type job struct {
	src        io.ReaderAt
	what       string // names src in messages
	size, from int64
	chunk      int
	h          hash.Hash // SHA-256 of the file up to what was read; nil with Options.SHA256
	o          *Options
	bufs       [][]byte
	start      time.Time // of the first chunk, for Rate
}

// hashPrefix hashes what the server already has, so that the SHA-256
// covers the whole file when the upload resumes.
func (j *job) hashPrefix() error {
	if j.h == nil {
		return nil
	}
	if _, err := io.Copy(j.h, io.NewSectionReader(j.src, 0, j.from)); err != nil {
		return xfer.Permanent(fmt.Errorf("reading %s: %w", j.what, err))
	}
	return nil
}

// hashBlock is how much of the file is read at once and handed to the
// hashing goroutine; the chunks are then cut from it.
const hashBlock = 1 << 20

// chunks reads the file from j.from and calls fn for each chunk. The
// SHA-256 runs on another goroutine (another core, where there is one): it
// would otherwise bound the rate (about 1.5 GB/s here against 2 GB/s for
// the transports). The file is read in blocks of whole chunks; a block is
// reused once both the hasher and fn are done with it.
func (j *job) chunks(fn func(c xfer.Chunk) error) error {
	per := max(1, hashBlock/j.chunk)
	bsize := per * j.chunk
	const nblocks = 3
	_, inMemory := j.src.(memory) // its chunks are the caller's slice: Stable
	if !inMemory && j.bufs == nil {
		for i := 0; i < nblocks; i++ {
			j.bufs = append(j.bufs, make([]byte, bsize))
		}
	}
	toHash := make(chan []byte, nblocks)
	hashed := make(chan struct{}, nblocks)
	go func() {
		for b := range toHash {
			if j.h != nil {
				j.h.Write(b)
			}
			hashed <- struct{}{}
		}
		close(hashed)
	}()
	inFlight := 0
	defer func() {
		close(toHash)
		for range hashed { // the hash is complete (or abandoned) on return
		}
	}()
	var scratch []byte
	for i, off := 0, j.from; off < j.size; i++ {
		if inFlight == nblocks {
			<-hashed // the oldest block is hashed: its buffer is free
			inFlight--
		}
		var buf []byte
		if j.bufs != nil {
			buf = j.bufs[i%nblocks]
		}
		blk, err := j.block(buf, off, min(int64(bsize), j.size-off))
		if err != nil {
			return err
		}
		toHash <- blk
		inFlight++
		for len(blk) > 0 {
			p := blk[:min(j.chunk, len(blk))]
			blk = blk[len(p):]
			c := xfer.Chunk{Off: off, Data: p, CRC32C: xfer.CRC32C(p), Orig: p, Stable: inMemory}
			if j.o.corrupt != nil && j.o.corrupt(off) {
				// A bit flipped after the CRC, as a bad link or NIC does;
				// on a copy, the hasher reads the block.
				scratch = append(scratch[:0], p...)
				scratch[0] ^= 1
				c.Data, c.Stable = scratch, false
			}
			if err := fn(c); err != nil {
				return err
			}
			off += int64(len(p))
			j.pace(off)
			if j.o.Progress != nil {
				j.o.Progress(off, j.size)
			}
		}
	}
	return nil
}

// block is the n bytes of the file at off: read into buf, or cut from
// the bytes of Bytes, which need no copy (the loop never writes to a
// block, and the transports copy what they keep).
func (j *job) block(buf []byte, off, n int64) ([]byte, error) {
	if m, ok := j.src.(memory); ok {
		return m[off : off+n : off+n], nil // size is len(m)
	}
	blk := buf[:n]
	if _, err := j.src.ReadAt(blk, off); err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%s shrank while being sent", j.what)
		}
		return nil, xfer.Permanent(err)
	}
	return blk, nil
}

// memory is the source of Bytes.
type memory []byte

func (m memory) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(m).ReadAt(p, off)
}

// pace sleeps to keep to Options.Rate.
func (j *job) pace(off int64) {
	r := j.o.Rate
	if r <= 0 {
		return
	}
	if j.start.IsZero() {
		j.start = time.Now()
	}
	due := time.Duration(float64(off-j.from) / float64(r) * float64(time.Second))
	if d := due - time.Since(j.start); d > 0 {
		time.Sleep(d)
	}
}

func (j *job) sum() []byte {
	if j.h == nil {
		return j.o.SHA256
	}
	return j.h.Sum(nil)
}

// wholeSHA256 hashes the whole file, apart from the running hash (or is
// Options.SHA256).
func (j *job) wholeSHA256() ([]byte, error) {
	if j.o.SHA256 != nil {
		return j.o.SHA256, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(j.src, 0, j.size)); err != nil {
		return nil, xfer.Permanent(err)
	}
	return h.Sum(nil), nil
}
