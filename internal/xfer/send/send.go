// Package send is the sending side of file transfer: one upload loop
// (ask the server's offset, send chunks from there, verify the server's
// SHA-256, resume after a failure) over the client of any transport
// (an xfer.Transport: gRPC, RSocket, tus).
package send

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/grpcxfer"
	"github.com/sluicehq/sluice/internal/xfer/rsocketxfer"
	"github.com/sluicehq/sluice/internal/xfer/tus"
	"github.com/sluicehq/sluice/rsocket"
)

// Chunk sizes --chunk auto picks, from the measured sweeps
// (docs/benchmarks.md, "File transfer", 2026-11-24 on an idle machine, 5
// alternating reps; re-checked 2026-11-27 by CPU per GB on a shared one):
// gRPC runs at a plateau from 256 KiB to 1 MiB messages (512 KiB the best
// median from memory, within 1 % of 256 KiB from disk); our RSocket, since
// its upload window is 8 MiB (rsocketxfer.ByteCredits), runs fastest and
// costs the least CPU per GB at 128 KiB payloads (sweep of 2026-11-28 on
// an idle machine: 550 MB/s and 3.50 s/GB from memory, 524 and 3.62 from
// disk, against 460–470 and 4.04–4.08 at 16 KiB, the best size under the
// old 64-payload window); a tus
// PATCH costs one fsync and one HTTP round trip, so it carries more.
const (
	AutoChunk        = 512 << 10
	AutoRSocketChunk = 128 << 10
	AutoTUSChunk     = 16 << 20
	// MaxTUSChunk bounds a tus PATCH: a body the server streams into the
	// file, not a message either end holds whole as gRPC and RSocket
	// chunks are (xfer.MaxChunk), but one the sender reads into memory.
	MaxTUSChunk = 64 << 20
)

// CheckChunk says whether chunk (0: auto) is a chunk size the transport
// of to takes: up to xfer.MaxChunk over gRPC and RSocket, MaxTUSChunk
// over tus.
func CheckChunk(to string, chunk int) error {
	limit, over := xfer.MaxChunk, "gRPC and RSocket take"
	if strings.HasPrefix(to, "http://") || strings.HasPrefix(to, "https://") {
		limit, over = MaxTUSChunk, "tus takes"
	}
	if chunk < 0 || chunk > limit {
		return fmt.Errorf("chunk size %s out of range: %s 1B .. %s (tus up to %s)", defaults.FormatSize(int64(chunk)), over, defaults.FormatSize(int64(limit)), defaults.FormatSize(MaxTUSChunk))
	}
	return nil
}

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
	// SHA256 is the file's SHA-256 when the caller already has it (from
	// a manifest, a content address, an earlier pass): the upload then
	// reads the file once, to send it, and does not hash it. The server
	// still hashes what it receives and refuses the file when the two
	// differ, an error no retry fixes (xfer.ErrChecksum, permanent).
	// Hashing costs the sender as much CPU as the receiver's own hash
	// (docs/xfer.md, "Where an upload's CPU goes").
	SHA256 []byte

	// corrupt, in tests, flips a bit of the chunk at off before it is
	// sent, once per offset it returns true for.
	corrupt func(off int64) bool
	// after, in tests, replaces time.After for the back-off.
	after func(time.Duration) <-chan time.Time
}

// maxRefusals is how many refused connections in a row end an upload: with
// the back-off, about 1.5 s for a server to come up.
const maxRefusals = 5

// refused tells a connection nothing accepted (on every transport: gRPC
// carries it in its status text).
func refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "connection refused")
}

// maxUnanswered is how many connections closed before any answer
// (unanswered) end an upload that never reached the server.
const maxUnanswered = 2

// unanswered tells a connection the server accepted and closed before
// answering anything: the RSocket client's *rsocket.NotRSocketError
// without Looks, gRPC's "error reading server preface" at its EOF or
// reset. An RSocket server closes at once a gRPC, HTTP or TLS client
// (rsocket/foreign.go), and a TLS one a plain-text client, so a client at
// the wrong listener sees this; before, gRPC at the RSocket port waited
// for the server's setup timeout, 10 s, and was retried 20 times.
func unanswered(err error) bool {
	var nr *rsocket.NotRSocketError
	if errors.As(err, &nr) {
		return nr.Looks == ""
	}
	s := err.Error()
	return strings.Contains(s, "error reading server preface: EOF") ||
		strings.Contains(s, "error reading server preface") && strings.Contains(s, "connection reset by peer")
}

// unansweredHint says what an unanswered connection likely means.
func unansweredHint(err error, to string) error {
	if errors.As(err, new(*rsocket.NotRSocketError)) {
		// It names the URL and the listener it should be.
		return fmt.Errorf("%w (is `sluice xfer serve` listening there for RSocket?)", err)
	}
	return fmt.Errorf("%w: %s closed the connection before answering: is it a gRPC listener (`sluice xfer serve --grpc`), not the RSocket or an HTTP one?", err, to)
}

// mismatch tells an answer in another protocol than the one spoken (TLS
// to plain text or back, HTTP/1 to gRPC, HTTP/1 or HTTP/2 to RSocket): no
// retry changes it.
func mismatch(err error) bool {
	var nr *rsocket.NotRSocketError
	if errors.As(err, &nr) && nr.Looks != "" {
		return true
	}
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
	return run(ctx, to, memory(data), int64(len(data)), "memory", "memory\x00"+memoryID(), o)
}

// run uploads size bytes of src; what names src in messages, fp
// fingerprints it for the tus client's URL memory.
func run(ctx context.Context, to string, src io.ReaderAt, size int64, what, fp string, o Options) ([]byte, error) {
	if err := xfer.ValidateName(o.Name); err != nil {
		return nil, err
	}
	if o.SHA256 != nil && len(o.SHA256) != sha256.Size {
		return nil, fmt.Errorf("Options.SHA256 has %d bytes, want %d", len(o.SHA256), sha256.Size)
	}
	if err := CheckChunk(to, o.Chunk); err != nil {
		return nil, err
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
	return retry(ctx, tr, to, src, size, what, &o)
}

// retry runs the upload loop over tr until it succeeds, fails for good,
// or has made o.Attempts attempts; to names the server in messages.
func retry(ctx context.Context, tr xfer.Transport, to string, src io.ReaderAt, size int64, what string, o *Options) ([]byte, error) {
	backoff := 100 * time.Millisecond
	// reached: the server answered some attempt (its offset), or failed
	// one past the connection. A server that refuses after that is
	// restarting under an upload, which gets every attempt; one that
	// never answered is most likely not there. Set by the answer, not
	// only by the error that ended an attempt: over tus each PATCH is a
	// new request, so the first error a killed server gives is a
	// refused connection (before, such an upload gave up after 5 tries,
	// 1.5 s into the restart; gRPC and RSocket saw a reset first).
	refusals, silent, reached := 0, 0, false
	for attempt := 1; ; attempt++ {
		sum, err := uploadOnce(ctx, tr, src, size, what, o, &reached)
		if err == nil {
			return sum, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if mismatch(err) {
			// A TLS or protocol mismatch: the same answer every time.
			if errors.As(err, new(*rsocket.NotRSocketError)) {
				return nil, xfer.Permanent(err) // it names the URL and the listener it should be
			}
			return nil, xfer.Permanent(fmt.Errorf("%w: %s does not speak this transport: is `sluice xfer serve` listening there for it?", err, to))
		}
		if !xfer.Retryable(err) {
			return nil, err
		}
		// early: accepted, then closed before any answer, by a server
		// that never answered this upload. Most likely another
		// protocol's listener (ours close at once what is not theirs:
		// rsocket/foreign.go). A server being stopped does that too, to
		// a connection left in its listen backlog: so one more try, not
		// none, and a refusal after it counts as a restart's.
		early := !reached && unanswered(err)
		if !refused(err) && !early {
			reached = true
		}
		switch {
		case early:
			silent++
			hint := unansweredHint(err, to)
			if silent >= maxUnanswered || attempt >= o.Attempts {
				return nil, xfer.Permanent(hint)
			}
			o.Log.Warn("the server closed the connection before answering; retrying once", "attempt", attempt, "err", hint)
		case refused(err) && !reached:
			// Nothing was sent: no upload to resume. A server being
			// (re)started gets a few tries; none at all is a mistake.
			refusals++
			hint := fmt.Errorf("%w: is `sluice xfer serve` running at %s?", err, to)
			if refusals >= maxRefusals || attempt >= o.Attempts {
				return nil, hint
			}
			o.Log.Warn("cannot connect; retrying", "attempt", attempt, "err", hint)
		case attempt >= o.Attempts:
			return nil, err
		default:
			o.Log.Warn("upload interrupted; resuming from the server's offset", "attempt", attempt, "err", err)
		}
		var re *xfer.RemoteError
		if !errors.As(err, &re) {
			tr.Reset() // a transport failure: start from a fresh connection
		}
		after := time.After
		if o.after != nil {
			after = o.after
		}
		select {
		case <-after(backoff):
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

// memoryID tells apart the uploads of Bytes in the tus client's URL
// memory.
func memoryID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
