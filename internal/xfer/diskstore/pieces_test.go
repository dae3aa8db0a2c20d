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

// A chunk with a bad CRC32C that fits in the current block (copied into
// its free tail and checked there, appendChecked) leaves no byte: not in
// the offset, the bytes counted, the file, nor the hash; the refused
// bytes copied past the block's end are overwritten by the chunks that
// follow, whether the refused chunk came mid-block or first in one, whole
// or in pieces, and whatever size the chunks sent again have.
func TestBadCRCInBlockLeavesNoByte(t *testing.T) {
	for _, pieces := range []bool{false, true} {
		dir := t.TempDir()
		s := openT(t, dir, Options{})
		data := xfertest.RandBytes(blockSize+20_000, 5)
		want := sha256.Sum256(data)
		bu, _ := s.Begin("f.bin", int64(len(data)), want[:], "", false)
		u := bu.(*Upload)
		write := func(off int, p []byte, crc uint32) error {
			var err error
			if pieces {
				_, err = u.WritePieces(int64(off), cut(p, 1000, 7), crc)
			} else {
				_, err = u.Write(int64(off), p, crc)
			}
			return err
		}
		garbage := func(n int) []byte { return bytes.Repeat([]byte{0xAB}, n) }
		rejected := int64(0)
		refuse := func(off, n int) { // a chunk of n garbage bytes sent with the CRC of the data
			t.Helper()
			if err := write(off, garbage(n), xfer.CRC32C(data[off:off+n])); !errors.Is(err, xfer.ErrChecksum) {
				t.Fatalf("pieces %v: bad chunk at %d: %v", pieces, off, err)
			}
			rejected++
			if u.Offset() != int64(off) || s.Stats.BytesReceived.Load() != int64(off) || s.Stats.ChunksRejected.Load() != rejected {
				t.Fatalf("pieces %v: after a refused chunk at %d: offset %d, %d bytes received, %d rejected",
					pieces, off, u.Offset(), s.Stats.BytesReceived.Load(), s.Stats.ChunksRejected.Load())
			}
		}
		refuse(0, 5000) // first in a block
		if err := write(0, data[:3000], xfer.CRC32C(data[:3000])); err != nil {
			t.Fatal(err)
		}
		refuse(3000, 9000) // mid-block
		if err := u.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		dataPath, _ := s.paths(u.rec.ID)
		if got, _ := os.ReadFile(dataPath); !bytes.Equal(got, data[:3000]) {
			t.Fatalf("pieces %v: the partial holds %d bytes, not the 3000 accepted", pieces, len(got))
		}
		for off := 3000; off < len(data); off += 100 {
			p := data[off:min(len(data), off+100)]
			if err := write(off, p, xfer.CRC32C(p)); err != nil {
				t.Fatal(err)
			}
		}
		if sum, err := u.Finish(nil, "test"); err != nil || !bytes.Equal(sum, want[:]) {
			t.Fatalf("pieces %v: finish: %x, %v", pieces, sum, err)
		}
		u.Release()
		if got, _ := os.ReadFile(filepath.Join(dir, "f.bin")); !bytes.Equal(got, data) {
			t.Fatalf("pieces %v: the file differs from the bytes sent", pieces)
		}
	}
}
