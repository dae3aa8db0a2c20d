package grpcxfer_test

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/internal/xfer/grpcxfer"
)

// piecesStore is a diskstore whose uploads count the chunks they are
// given in pieces (xfer.PieceWriter), or, when whole is set, take only
// whole chunks (a store without WritePieces).
type piecesStore struct {
	*diskstore.Uploads
	whole               bool
	chunks, multiPieces atomic.Int64
}

func (s *piecesStore) Begin(name string, size int64, sha []byte, meta string, fresh bool) (xfer.BackendUpload, error) {
	u, err := s.Uploads.Begin(name, size, sha, meta, fresh)
	if err != nil || s.whole {
		return wholeUpload{u}, err
	}
	return &countedUpload{BackendUpload: u, s: s}, nil
}

// wholeUpload hides the store's WritePieces.
type wholeUpload struct{ xfer.BackendUpload }

type countedUpload struct {
	xfer.BackendUpload
	s *piecesStore
}

func (u *countedUpload) WritePieces(off int64, pieces [][]byte, crc uint32) (int64, error) {
	u.s.chunks.Add(1)
	if len(pieces) > 1 {
		u.s.multiPieces.Add(1)
	}
	return u.BackendUpload.(xfer.PieceWriter).WritePieces(off, pieces, crc)
}

// upload sends data as name through a grpcxfer server over st, in
// chunks of n, and returns the file the server landed.
func upload(t *testing.T, st *piecesStore, dir, name string, data []byte, n int) []byte {
	t.Helper()
	c, err := grpcxfer.Dial(serveT(t, st))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Begin(t.Context(), xfer.Outgoing{Name: name, Size: int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for off := 0; off < len(data); off += n {
		p := data[off:min(len(data), off+n)]
		if err := s.Chunk(xfer.Chunk{Off: int64(off), Data: p, CRC32C: xfer.CRC32C(p), Orig: p}); err != nil {
			t.Fatal(s.Cause(err))
		}
	}
	want := sha256.Sum256(data)
	if _, err := s.Finish(want[:]); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// The server hands each chunk to a store that takes pieces as the HTTP/2
// frames it came in, not gathered into one buffer first (a copy of every
// byte, gone); a chunk of 128 KiB comes in several 16 KiB frames. Before,
// every chunk went through Write, gathered.
func TestServerWritesChunksInTheirFrames(t *testing.T) {
	dir := t.TempDir()
	ds, err := diskstore.Open(dir, diskstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	st := &piecesStore{Uploads: ds}
	data := xfertest.RandBytes(4<<20+333, 5)
	const chunk = 128 << 10
	if got := upload(t, st, dir, "f.bin", data, chunk); !bytes.Equal(got, data) {
		t.Fatal("the file landed differs from the bytes sent")
	}
	chunks := int64((len(data) + chunk - 1) / chunk)
	if st.chunks.Load() != chunks || st.multiPieces.Load() == 0 {
		t.Fatalf("%d of %d chunks written in pieces, %d of them in more than one", st.chunks.Load(), chunks, st.multiPieces.Load())
	}
}

// A store without WritePieces gets each chunk whole, gathered.
func TestServerGathersChunksForAWholeChunkStore(t *testing.T) {
	dir := t.TempDir()
	ds, err := diskstore.Open(dir, diskstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	st := &piecesStore{Uploads: ds, whole: true}
	data := xfertest.RandBytes(1<<20+17, 6)
	if got := upload(t, st, dir, "g.bin", data, 100_000); !bytes.Equal(got, data) {
		t.Fatal("the file landed differs from the bytes sent")
	}
	if st.chunks.Load() != 0 {
		t.Fatalf("%d chunks written in pieces to a store without WritePieces", st.chunks.Load())
	}
}
