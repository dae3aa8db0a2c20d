package diskstore

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer"
)

// sizedBody is a body that knows how much of it is left, as an HTTP body
// with a Content-Length does (idleread.Body.Remaining): ReadFrom then
// hands the last block to the hasher piece by piece as it arrives.
type sizedBody struct {
	r    io.Reader
	left int64
	step int // bytes per Read at most: reads end anywhere in a piece
}

func (b *sizedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p[:min(len(p), b.step)])
	b.left -= int64(n)
	return n, err
}

func (b *sizedBody) Remaining() (int64, bool) { return b.left, true }

// TestReadFromLastBlockInPieces: bodies whose last block is hashed piece
// by piece (tus PATCHes, POSTs), of every length around the piece and
// block sizes and after an offset that is not block-aligned, give the
// file and the SHA-256 of a plain write; a body refused by its checksum,
// or past the size, after some of its pieces were hashed, leaves neither
// its bytes nor their hash (rolled back), and the body sent again lands.
func TestReadFromLastBlockInPieces(t *testing.T) {
	lengths := []int{1, bodyPiece - 1, bodyPiece, bodyPiece + 1, 3*bodyPiece + 17, blockSize - 1, blockSize, blockSize + 1, 2*blockSize + bodyPiece/2}
	for _, first := range []int{0, 1000} {
		for _, n := range lengths {
			t.Run(fmt.Sprintf("after%d/%d", first, n), func(t *testing.T) {
				s := openT(t, t.TempDir(), Options{})
				size := first + n
				data := xfertest.RandBytes(size, int64(n))
				u, err := s.Begin("f", int64(size), nil, "", false)
				if err != nil {
					t.Fatal(err)
				}
				defer u.Release()
				if first > 0 {
					writeAll(t, u, data[:first], 0, first)
				}
				body := func(p []byte) *sizedBody { return &sizedBody{bytes.NewReader(p), int64(len(p)), 50_000} }
				// Refused by its checksum once all of it was read (and
				// its last block hashed in pieces): nothing kept.
				bad := sha1.Sum([]byte("x"))
				if got, err := u.ReadFrom(int64(first), body(data[first:]), sha1.New(), bad[:]); !errors.Is(err, xfer.ErrChecksum) || got != int64(first) {
					t.Fatalf("bad checksum: %d, %v", got, err)
				}
				// Past the size: refused, nothing kept.
				over := append(append([]byte(nil), data[first:]...), 'x')
				if got, err := u.ReadFrom(int64(first), body(over), nil, nil); !errors.Is(err, xfer.ErrOverSize) || got != int64(first) {
					t.Fatalf("over size: %d, %v", got, err)
				}
				good := sha1.Sum(data[first:])
				if got, err := u.ReadFrom(int64(first), body(data[first:]), sha1.New(), good[:]); err != nil || got != int64(size) {
					t.Fatalf("body: %d, %v", got, err)
				}
				want := sha256.Sum256(data)
				sum, err := u.Finish(want[:], "test")
				if err != nil || !bytes.Equal(sum, want[:]) {
					t.Fatalf("Finish: %x, %v", sum, err)
				}
			})
		}
	}
}
