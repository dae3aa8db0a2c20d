package xfer

import (
	"context"
	"hash"
	"io"
	"sync/atomic"
	"time"
)

// Backend is the contract between the transports (gRPC, RSocket, tus,
// HTTP POST: the server adapters) and where uploads are kept: begin an
// upload, ask its offset, write at that offset, make it durable, verify
// and commit it, expire what was left. The local-disk store
// (internal/xfer/diskstore) is one implementation; an object store (S3:
// multipart parts, the sidecar as an object) is meant to be another. Modelled on tusd's DataStore and Upload, with what only some
// backends can do in optional interfaces (IDBackend), which an adapter
// that needs them asks for.
//
// Every error a Backend returns is one of errors.go's (ErrNoSpace,
// ErrChecksum, *OffsetError, *BusyError...), or wraps one, so that every
// transport answers it with the same wire code.
type Backend interface {
	// Begin returns the upload of name, acquired for writing (Release
	// it): the existing partial of that name when it has the same size
	// (and expected SHA-256, when both have one), so the writer resumes
	// at its Offset; else a new one. fresh always starts a new one.
	Begin(name string, size int64, sha []byte, meta string, fresh bool) (BackendUpload, error)
	// Stat describes the partial upload of name (ErrNotFound when none).
	Stat(name string) (Info, error)
	// Expire removes the uploads idle since before now minus
	// ExpireAfter, and returns how many.
	Expire(now time.Time) int
	// MaxSize is the largest upload accepted (0: no limit).
	MaxSize() int64
	// IdleTimeout is how long a writer's body may send nothing.
	IdleTimeout() time.Duration
	// Counters are the counters the adapters add to (idle timeouts).
	Counters() *Stats
}

// IDBackend is a Backend whose uploads are also addressed by the id it
// gave them, and whose finished uploads' descriptions are kept until they
// expire: what tus needs (its upload URLs are ids, and a client asks for
// the offset of an upload it finished).
type IDBackend interface {
	Backend
	// BeginKept is Begin for an upload whose description is kept once
	// it is finished.
	BeginKept(name string, size int64, sha []byte, meta string, fresh bool) (BackendUpload, error)
	// StatID describes the upload id, partial or finished (ErrNotFound).
	StatID(id string) (Info, error)
	// Acquire takes the upload id for writing, interrupting the writer
	// that holds it (OnTakeover); a *BusyError when it cannot.
	Acquire(ctx context.Context, id string) (BackendUpload, error)
	// RemoveFinished forgets the finished upload id (false: none).
	RemoveFinished(id string) bool
}

// ConcatBackend is an IDBackend that joins finished uploads into one:
// what tus's concatenation extension needs (several partial uploads sent
// in parallel, then one final upload made of them). A tus server
// advertises the extension only over a store that has it (as tusd's
// ConcatableUpload): the S3 store does, the disk store does not.
type ConcatBackend interface {
	IDBackend
	// BeginPartial starts a partial upload of size bytes, acquired for
	// writing (Release it). Finished, its bytes stay hidden, addressed by
	// its id, until a Concat uses them or they expire.
	BeginPartial(size int64, meta string) (BackendUpload, error)
	// Concat makes the finished partial uploads ids, in that order, the
	// file name: visible only once its SHA-256 matches sha (when not
	// nil). The partials are gone once it returns nil; the Info is the
	// finished final upload's, kept as BeginKept's.
	Concat(name string, sha []byte, meta string, ids []string) (Info, error)
}

// BackendUpload is one upload, held by its writer from Begin or Acquire
// until Release.
type BackendUpload interface {
	// Info describes the upload; its Offset is the durable offset.
	Info() Info
	// Offset is the next byte the writer must send (>= Info().Offset).
	Offset() int64
	// Write appends the chunk p, whose CRC32C is crc, at off (which must
	// be Offset) and returns the new offset.
	Write(off int64, p []byte, crc uint32) (int64, error)
	// ReadFrom appends what r gives at off until EOF; with sum and want,
	// a body whose hash is not want is refused whole. The new offset is
	// durable on return.
	ReadFrom(off int64, r io.Reader, sum hash.Hash, want []byte) (int64, error)
	// Checkpoint makes the bytes written so far durable: Info().Offset
	// and a restarted server then agree with Offset.
	Checkpoint() error
	// Finish verifies that all Size bytes are there and their SHA-256
	// matches the expected ones (Begin's, clientSHA's), commits the file
	// under its name, and returns the SHA-256. via names the transport.
	Finish(clientSHA []byte, via string) ([]byte, error)
	// Remove terminates the upload and deletes what it holds.
	Remove()
	// OnTakeover sets how a newer request for the upload stops this
	// writer (f makes its reads fail soon).
	OnTakeover(f func())
	// Release ends this writer's hold, saving its progress first.
	Release()
}

// PieceWriter is a BackendUpload that takes a chunk in pieces, as a
// transport received it (gRPC: the HTTP/2 frames a message came in),
// and copies them once into its own buffers; the caller does not gather
// them into one slice first, a copy of every byte (docs/xfer.md, "Where
// an upload's CPU goes"). WritePieces is Write of the pieces' bytes in
// order: the CRC32C crc is of all of them, checked before any is kept.
// The store does not hold the pieces after it returns.
type PieceWriter interface {
	WritePieces(off int64, pieces [][]byte, crc uint32) (int64, error)
}

// Info describes an upload.
type Info struct {
	ID, Name     string
	Size, Offset int64
	Meta         string
	SHA256       []byte
	Created      time.Time
	Updated      time.Time
	Expires      time.Time // zero when uploads do not expire
	Active       bool      // a writer holds it
	// Finished: the upload completed (Offset == Size) and is kept until it
	// expires (BeginKept); SHA256 is then the file's.
	Finished bool
	// Partial: a partial upload (ConcatBackend.BeginPartial), whose
	// bytes only a Concat makes a file. Parts: the partial uploads a
	// final upload was made of (ConcatBackend.Concat), in order.
	Partial bool
	Parts   []string
}

// Stats are a backend's counters since it was opened; the adapters add
// to IdleTimeouts.
type Stats struct {
	BytesReceived, UploadsCompleted, UploadsFailed, ChunksRejected, Expired, Salvaged atomic.Int64
	// TakenOver counts writers interrupted by a newer request for their
	// upload, IdleTimeouts writers ended because their body stalled.
	TakenOver, IdleTimeouts atomic.Int64
	// Evicted counts partial uploads, and finished uploads' records,
	// removed because the store keeps at most so many (diskstore's
	// Options.MaxPartials).
	Evicted atomic.Int64
	// BufferBytes is the upload buffer memory in use now (blocks out of
	// the budget, diskstore.Options.BufferBytes), BufferPeak the most it was,
	// BufferMisses how many writes found the budget spent and went to
	// disk without a block.
	BufferBytes, BufferPeak, BufferMisses atomic.Int64
}
