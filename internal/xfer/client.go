package xfer

import (
	"context"
	"time"
)

// Transport is one transport's client as the sending side's upload loop
// (internal/xfer/send) drives it: ask the server's offset, open an
// upload from there, send chunks, finish. The loop (reading, hashing,
// pacing, retrying from the server's offset) is written once; a
// transport only says how each step goes on its wire.
type Transport interface {
	// Offset is the server's durable offset and size for name; exists
	// is false when it has no upload of that name.
	Offset(ctx context.Context, name string) (off, size int64, exists bool, err error)
	// Begin opens the upload of out on the server, to be continued from
	// out.From.
	Begin(ctx context.Context, out Outgoing) (Stream, error)
	// Reset drops the connection after a transport failure, so that the
	// next attempt starts from a fresh one.
	Reset()
	Close() error
}

// Outgoing is the file an upload sends.
type Outgoing struct {
	Name       string
	Size, From int64
	// SHA256 hashes the whole file, for a transport that declares it
	// when the upload is created (tus); the others send it in Finish.
	SHA256 func() ([]byte, error)
}

// Stream is one upload under way on a transport.
type Stream interface {
	// Chunk sends one chunk; it may return before the server has it.
	// The buffers of c may be reused once it returns.
	Chunk(c Chunk) error
	// Finish sends the file's SHA-256 (sum) and returns the server's
	// once the server has the file in place.
	Finish(sum []byte) ([]byte, error)
	// Cause is why the upload failed when Chunk returned err: the
	// server's refusal when it sent one, else err.
	Cause(err error) error
	// Close ends the stream (after Finish, or to abandon it).
	Close()
}

// Chunk is one chunk of the file at Off.
type Chunk struct {
	Off  int64
	Data []byte
	// CRC32C and the checksums a transport computes itself are of
	// Orig, which is Data unless a test corrupted the copy sent.
	CRC32C uint32
	Orig   []byte
	// Stable says Data stays unchanged until the upload's Stream is
	// closed (a slice of the caller's file in memory, not a reused
	// buffer): a transport may send it from there without copying it,
	// as long as Close waits until it no longer refers to it.
	Stable bool
}

// MaxBackoff is the longest wait between the upload loop's attempts, and
// bounds a transport's own connect back-off under them.
const MaxBackoff = 3 * time.Second
