package send

import (
	"bytes"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer"
)

// Only a chunk cut from the caller's slice (Bytes) is Stable, which lets
// the RSocket client send it without a copy: a chunk read into one of the
// loop's blocks (File), or the scratch copy of a corrupted one, is
// overwritten once Chunk returns and must not be.
func TestOnlyMemoryChunksAreStable(t *testing.T) {
	data := xfertest.RandBytes(1<<20, 16)
	const chunk = 128 << 10
	for _, c := range []struct {
		name string
		src  interface {
			ReadAt([]byte, int64) (int, error)
		}
		corrupt func(int64) bool
		stable  func(off int64) bool
	}{
		{"memory", memory(data), nil, func(int64) bool { return true }},
		{"reader", bytes.NewReader(data), nil, func(int64) bool { return false }},
		{"memory, corrupted", memory(data), func(off int64) bool { return off == 2*chunk }, func(off int64) bool { return off != 2*chunk }},
	} {
		j := &job{src: c.src, what: c.name, size: int64(len(data)), chunk: chunk, o: &Options{corrupt: c.corrupt}}
		n := 0
		err := j.chunks(func(ch xfer.Chunk) error {
			n++
			if ch.Stable != c.stable(ch.Off) {
				t.Errorf("%s: chunk at %d Stable %v", c.name, ch.Off, ch.Stable)
			}
			if ch.Stable && &ch.Data[0] != &data[ch.Off] {
				t.Errorf("%s: Stable chunk at %d is not the caller's memory", c.name, ch.Off)
			}
			return nil
		})
		if err != nil || n != len(data)/chunk {
			t.Fatalf("%s: %d chunks, %v", c.name, n, err)
		}
	}
}
