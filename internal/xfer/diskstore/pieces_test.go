package diskstore

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer"
)

// cut splits p into pieces of the sizes in sizes, cycled; the last one
// takes what is left.
func cut(p []byte, sizes ...int) [][]byte {
	var out [][]byte
	for i := 0; len(p) > 0; i++ {
		n := min(len(p), sizes[i%len(sizes)])
		out = append(out, p[:n])
		p = p[n:]
	}
	return out
}

// writePieces writes data in chunks of n, each given as pieces of the
// sizes in sizes (as gRPC's frames bring a chunk).
func writePieces(t *testing.T, u *Upload, data []byte, n int, sizes ...int) {
	t.Helper()
	for off := 0; off < len(data); off += n {
		p := data[off:min(len(data), off+n)]
		got, err := u.WritePieces(int64(off), cut(p, sizes...), xfer.CRC32C(p))
		if err != nil || got != int64(off+len(p)) {
			t.Fatalf("write at %d: offset %d, %v", off, got, err)
		}
	}
}

// A chunk written in pieces lands as the same chunk written whole would,
// pieces and chunks crossing the 1 MiB block boundaries, with blocks and
// with the budget spent (each chunk then written and hashed in place).
func TestWritePiecesLandsTheirBytesInOrder(t *testing.T) {
	data := xfertest.RandBytes(3*blockSize+12_345, 7)
	want := sha256.Sum256(data)
	for _, spent := range []bool{false, true} {
		dir := t.TempDir()
		o := Options{}
		if spent {
			o.BufferBytes = blockSize
		}
		s := openT(t, dir, o)
		if spent { // another upload holds the budget's only block
			hog, err := s.Begin("hog", 2, nil, "", false)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := hog.Write(0, []byte{1}, xfer.CRC32C([]byte{1})); err != nil {
				t.Fatal(err)
			}
			defer hog.Release()
		}
		bu, err := s.Begin("f.bin", int64(len(data)), want[:], "", false)
		if err != nil {
			t.Fatal(err)
		}
		u := bu.(*Upload)
		misses := s.Stats.BufferMisses.Load()
		writePieces(t, u, data, 128<<10+7, 16<<10-9, 1, 16<<10)
		if got := s.Stats.BufferMisses.Load() > misses; got != spent {
			t.Fatalf("budget spent %v, but written unbuffered: %v", spent, got)
		}
		if sum, err := u.Finish(want[:], "test"); err != nil || !bytes.Equal(sum, want[:]) {
			t.Fatalf("finish: %x, %v", sum, err)
		}
		u.Release()
		if got, _ := os.ReadFile(filepath.Join(dir, "f.bin")); !bytes.Equal(got, data) {
			t.Fatalf("budget spent %v: the file differs from the bytes sent", spent)
		}
		hogs := int64(0)
		if spent {
			hogs = 1
		}
		if n := s.Stats.BytesReceived.Load(); n != int64(len(data))+hogs {
			t.Fatalf("BytesReceived %d", n)
		}
	}
}

// A chunk in pieces whose CRC32C (across them) is wrong is refused
// whole: nothing of it is kept, even its pieces before the bad byte,
// and the chunk sent again is taken.
func TestWritePiecesRefusesBadCRCWhole(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	bu, _ := s.Begin("f", 3*blockSize, nil, "", false)
	u := bu.(*Upload)
	p := xfertest.RandBytes(blockSize+5000, 3) // crosses a block boundary
	bad := bytes.Clone(p)
	bad[len(bad)-1] ^= 1
	if _, err := u.WritePieces(0, cut(bad, 16<<10), xfer.CRC32C(p)); !errors.Is(err, xfer.ErrChecksum) {
		t.Fatalf("bad last byte: %v", err)
	}
	if u.Offset() != 0 || s.Stats.ChunksRejected.Load() != 1 || s.Stats.BytesReceived.Load() != 0 {
		t.Fatalf("offset %d, %d rejected, %d received after a refused chunk",
			u.Offset(), s.Stats.ChunksRejected.Load(), s.Stats.BytesReceived.Load())
	}
	if _, err := u.WritePieces(0, cut(p, 16<<10), xfer.CRC32C(p)); err != nil {
		t.Fatal(err)
	}
	var oe *xfer.OffsetError
	if _, err := u.WritePieces(0, cut(p, 16<<10), xfer.CRC32C(p)); !errors.As(err, &oe) || oe.Have != int64(len(p)) {
		t.Fatalf("replayed chunk: %v", err)
	}
	if err := u.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	u.Release()
	dataPath, _ := s.paths(u.rec.ID)
	got, _ := os.ReadFile(dataPath)
	if !bytes.Equal(got, p) {
		t.Fatalf("the partial holds %d bytes, not the chunk's %d", len(got), len(p))
	}
}
