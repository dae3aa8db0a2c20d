// Package send is the sending side of file transfer: one upload loop
// (ask the server's offset, send chunks from there, verify the server's
// SHA-256, resume after a failure) over the client of any transport
// (an xfer.Transport: gRPC, RSocket, tus).
package send

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/grpcxfer"
	"github.com/sluicehq/sluice/internal/xfer/rsocketxfer"
	"github.com/sluicehq/sluice/internal/xfer/tus"
)

// Chunk sizes --chunk auto picks, from the measured sweeps
// (docs/benchmarks.md, "File transfer", 2026-11-24 on an idle machine, 5
// alternating reps): gRPC runs at a plateau from 256 KiB to 1 MiB messages
// (512 KiB the best median from memory, within 1 % of 256 KiB from disk);
// our RSocket peaks at 8-16 KiB payloads and loses a quarter by 1 MiB (not
// profiled yet); a tus PATCH costs
// one fsync and one HTTP round trip, so it carries more.
const (
	AutoChunk        = 512 << 10
	AutoRSocketChunk = 16 << 10
	AutoTUSChunk     = 16 << 20
)

// Options configure File and Bytes.
type Options struct {
	// Name on the server (default: the file's base name).
	Name string
	// Chunk is the chunk (tus: PATCH) size; 0 picks it per transport.
	Chunk int
	// Progress is called with the bytes the server has (resumed ones
	// included) after each chunk.
	Progress func(done, total int64)
	Log      *slog.Logger
	// Attempts bounds how often an upload starts again from the server's
	// offset after a retryable failure (default 20).
	Attempts int
	// Rate caps the sending rate in bytes per second (0: no cap).
	Rate int64
	// StateDir keeps tus upload URLs between runs, so that a send that
	// was killed resumes (default ~/.cache/sluice/xfer).
	StateDir string

	// corrupt, in tests, flips a bit of the chunk at off before it is
	// sent, once per offset it returns true for.
	corrupt func(off int64) bool
}

// maxRefusals is how many refused connections in a row end an upload: with
// the back-off, about 1.5 s for a server to come up.
const maxRefusals = 5

// refused tells a connection nothing accepted (on every transport: gRPC
// carries it in its status text).
func refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "connection refused")
}

// mismatch tells an answer in another protocol than the one spoken (TLS
// to plain text or back, HTTP/1 to gRPC): no retry changes it.
func mismatch(err error) bool {
	s := err.Error()
	for _, m := range []string{
		"server gave HTTP response to HTTPS client", "first record does not look like a TLS handshake",
		"malformed HTTP response", "frame header looked like an HTTP/1.1 header", "error reading server preface: http2: frame too large",
		"tls: ", "x509: ",
	} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// File uploads the file at path to the server at `to` (grpc://HOST:PORT,
// tcp://HOST:PORT for RSocket, http://HOST:PORT/files/ for tus), continuing
// from the server's offset, and returns the file's SHA-256 once the server
// verified it and put it in place. Retryable failures (a refused chunk, a
// dropped connection, a restarted server) start again from the server's
// offset, up to Attempts times.
func File(ctx context.Context, to, path string, o Options) ([]byte, error) {
	if o.Name == "" {
		o.Name = filepath.Base(path)
	}
	if err := xfer.ValidateName(o.Name); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	abs, _ := filepath.Abs(path)
	fp := strings.Join([]string{abs, strconv.FormatInt(st.Size(), 10), strconv.FormatInt(st.ModTime().UnixNano(), 10)}, "\x00")
	return run(ctx, to, f, st.Size(), path, fp, o)
}

// Bytes uploads data as o.Name (which must be set) like File.
func Bytes(ctx context.Context, to string, data []byte, o Options) ([]byte, error) {
	if o.Name == "" {
		return nil, fmt.Errorf("send.Bytes needs a name")
	}
	return run(ctx, to, bytes.NewReader(data), int64(len(data)), "memory", "memory\x00"+memoryID(), o)
}

// run uploads size bytes of src; what names src in messages, fp
// fingerprints it for the tus client's URL memory.
func run(ctx context.Context, to string, src io.ReaderAt, size int64, what, fp string, o Options) ([]byte, error) {
	if err := xfer.ValidateName(o.Name); err != nil {
		return nil, err
	}
	if o.Chunk < 0 || o.Chunk > xfer.MaxChunk {
		return nil, fmt.Errorf("chunk size %d out of range (1 B .. %d MiB)", o.Chunk, xfer.MaxChunk>>20)
	}
	if o.Attempts <= 0 {
		o.Attempts = 20
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	tr, err := newTransport(to, fp, &o)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	backoff := 100 * time.Millisecond
	// reached: some attempt got past the connection. A server that
	// refuses after that is restarting under an upload, which gets every
	// attempt; one that never answered is most likely not there.
	refusals, reached := 0, false
	for attempt := 1; ; attempt++ {
		sum, err := uploadOnce(ctx, tr, src, size, what, &o)
		if err == nil {
			return sum, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if mismatch(err) {
			// A TLS or protocol mismatch: the same answer every time.
			return nil, xfer.Permanent(fmt.Errorf("%w: %s does not speak this transport: is `sluice xfer serve` listening there for it?", err, to))
		}
		if !xfer.Retryable(err) {
			return nil, err
		}
		if !refused(err) {
			reached = true
		}
		if refused(err) && !reached {
			// Nothing was sent: no upload to resume. A server being
			// (re)started gets a few tries; none at all is a mistake.
			refusals++
			hint := fmt.Errorf("%w: is `sluice xfer serve` running at %s?", err, to)
			if refusals >= maxRefusals || attempt >= o.Attempts {
				return nil, hint
			}
			o.Log.Warn("cannot connect; retrying", "attempt", attempt, "err", hint)
		} else if attempt >= o.Attempts {
			return nil, err
		} else {
			o.Log.Warn("upload interrupted; resuming from the server's offset", "attempt", attempt, "err", err)
		}
		var re *xfer.RemoteError
		if !errors.As(err, &re) {
			tr.Reset() // a transport failure: start from a fresh connection
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		backoff = min(2*backoff, xfer.MaxBackoff)
	}
}

func newTransport(to, fp string, o *Options) (xfer.Transport, error) {
	u, err := url.Parse(to)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("bad --to %q: want grpc://HOST:PORT, tcp://HOST:PORT or http://HOST:PORT/files/", to)
	}
	switch u.Scheme {
	case "grpc":
		if o.Chunk == 0 {
			o.Chunk = AutoChunk
		}
		return grpcxfer.Dial(u.Host)
	case "tcp":
		if o.Chunk == 0 {
			o.Chunk = AutoRSocketChunk
		}
		return rsocketxfer.NewClient(to), nil
	case "http", "https":
		if o.Chunk == 0 {
			o.Chunk = AutoTUSChunk
		}
		return tus.NewClient(to, fp, o.Name, o.StateDir)
	}
	return nil, fmt.Errorf("bad --to %q: unknown scheme %q (grpc, tcp or http)", to, u.Scheme)
}

// uploadOnce is one pass of the upload loop: ask the server's offset, begin
// from it (from zero when the server has no upload of this size), send
// the chunks, finish, and check the server's SHA-256 against ours.
func uploadOnce(ctx context.Context, tr xfer.Transport, src io.ReaderAt, size int64, what string, o *Options) ([]byte, error) {
	off, ssize, exists, err := tr.Offset(ctx, o.Name)
	if err != nil {
		return nil, err
	}
	from := int64(0)
	if exists && ssize == size && off <= size {
		from = off
	}
	j := &job{src: src, what: what, size: size, from: from, chunk: o.Chunk, h: sha256.New(), o: o}
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
	defer st.Close()
	if err := j.chunks(st.Chunk); err != nil {
		var pe *xfer.PermanentError
		if errors.As(err, &pe) {
			return nil, err // ours, not the server's
		}
		return nil, st.Cause(err)
	}
	mine := j.sum()
	sum, err := st.Finish(mine)
	if err != nil {
		return nil, err
	}
	if string(sum) != string(mine) {
		return nil, xfer.Permanent(fmt.Errorf("the server's SHA-256 %x differs from ours %x", sum, mine))
	}
	return sum, nil
}

// job is one attempt at sending a file from an offset.
type job struct {
	src        io.ReaderAt
	what       string // names src in messages
	size, from int64
	chunk      int
	h          hash.Hash // SHA-256 of the file up to what was read
	o          *Options
	bufs       [][]byte
	start      time.Time // of the first chunk, for Rate
}

// hashPrefix hashes what the server already has, so that the SHA-256
// covers the whole file when the upload resumes.
func (j *job) hashPrefix() error {
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
	if j.bufs == nil {
		for i := 0; i < nblocks; i++ {
			j.bufs = append(j.bufs, make([]byte, bsize))
		}
	}
	toHash := make(chan []byte, nblocks)
	hashed := make(chan struct{}, nblocks)
	go func() {
		for b := range toHash {
			j.h.Write(b)
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
		blk := j.bufs[i%nblocks][:min(int64(bsize), j.size-off)]
		if _, err := j.src.ReadAt(blk, off); err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%s shrank while being sent", j.what)
			}
			return xfer.Permanent(err)
		}
		toHash <- blk
		inFlight++
		for len(blk) > 0 {
			p := blk[:min(j.chunk, len(blk))]
			blk = blk[len(p):]
			c := xfer.Chunk{Off: off, Data: p, CRC32C: xfer.CRC32C(p), Orig: p}
			if j.o.corrupt != nil && j.o.corrupt(off) {
				// A bit flipped after the CRC, as a bad link or NIC does;
				// on a copy, the hasher reads the block.
				scratch = append(scratch[:0], p...)
				scratch[0] ^= 1
				c.Data = scratch
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

func (j *job) sum() []byte { return j.h.Sum(nil) }

// wholeSHA256 hashes the whole file, apart from the running hash.
func (j *job) wholeSHA256() ([]byte, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(j.src, 0, j.size)); err != nil {
		return nil, xfer.Permanent(err)
	}
	return h.Sum(nil), nil
}

// memoryID tells apart the uploads of Bytes in the tus client's URL
// memory.
func memoryID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
