package rsocket

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// FuzzFrameReader: whatever the frame sizes and however the peer's bytes
// are cut into reads, frameReader returns exactly the frames of the
// stream, in order, then io.EOF (or io.ErrUnexpectedEOF when the stream
// ends inside a frame). The reader is the first decoder of every peer's
// bytes, with four buffers it moves frames between (its small one, a
// pooled large one, the caller's dst, and a frame read straight into dst
// after a huge one): a frame cut or shifted by any of those moves would
// reach the connection's machine as a different frame. Half the inputs go
// through a real socket pair (the raw path, which lends and borrows the
// large buffer around each wait for the peer), half through an io.Reader
// that returns the stream in the fuzzed read sizes.
//
//	go test -run '^$' -fuzz FuzzFrameReader -fuzztime 2m ./rsocket/
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte{0x00, 0x10, 0x40, 0x00, 0x80, 0x10, 0xC0, 0x05, 0x00, 0x02}, []byte{3, 200, 1, 255, 7}, false, false)
	f.Add([]byte{0x40, 0x01, 0x40, 0x02, 0x00, 0x00, 0x80, 0x40}, []byte{130, 140, 2}, true, false)
	f.Add([]byte{0xC0, 0x00, 0x00, 0x01, 0x80, 0xFF}, []byte{255, 0, 128}, true, true)
	f.Add([]byte{0x00, 0x00, 0x00, 0x00}, []byte{0}, false, true)
	f.Fuzz(func(t *testing.T, spec, reads []byte, socket, cut bool) {
		var sizes []int
		total := 0
		for i := 0; i+1 < len(spec) && len(sizes) < 12; i += 2 {
			n := frameSizeOf(uint16(spec[i])<<8 | uint16(spec[i+1]))
			if total+n > 6<<20 {
				break
			}
			sizes = append(sizes, n)
			total += n
		}
		var stream bytes.Buffer
		for i, n := range sizes {
			stream.Write([]byte{byte(n >> 16), byte(n >> 8), byte(n)})
			stream.Write(bytes.Repeat([]byte{byte(i + 1)}, n))
		}
		all := stream.Bytes()
		if cut && len(all) > 0 {
			// End the stream inside the last frame or its prefix.
			all = all[:len(all)-1]
		}
		// At most about 4,096 reads (or writes): a 6 MiB stream a byte at a
		// time took 14 s over TCP, which the fuzzer reports as a hang.
		least := len(all) / 4096
		var src io.Reader = &cutReader{b: all, sizes: reads, least: least}
		if socket {
			a, b := tcpPair(t) // closed at the test's end, the writer's too
			go func() {
				w := &cutReader{b: all, sizes: reads, least: least}
				buf := make([]byte, 4<<20)
				for {
					n, err := w.Read(buf)
					if n > 0 {
						if _, err := a.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						a.Close()
						return
					}
				}
			}()
			src = b
		}
		fr := newFrameReader(src)
		var dst []byte
		for i, n := range sizes {
			got, err := fr.readFrame(dst)
			if cut && i == len(sizes)-1 {
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("frame %d of %d bytes cut short: %v (%d bytes), want io.ErrUnexpectedEOF", i, n, err, len(got))
				}
				return
			}
			if err != nil {
				t.Fatalf("frame %d of %d bytes: %v", i, n, err)
			}
			if len(got) != n || (n > 0 && (got[0] != byte(i+1) || got[n-1] != byte(i+1) || bytes.Count(got, []byte{byte(i + 1)}) != n)) {
				t.Fatalf("frame %d: got %d bytes, want %d of %d", i, len(got), n, i+1)
			}
			dst = got[:0] // as the driver does: the next frame may reuse it
		}
		if _, err := fr.readFrame(dst); err != io.EOF {
			t.Fatalf("after the last of %d frames: %v, want io.EOF", len(sizes), err)
		}
	})
}

// frameSizeOf spreads a fuzzed 16-bit value over the frame sizes where
// frameReader changes its way: tiny and around smallRead, around
// largeRead (the buffer's size: a frame fits or is read as huge), up to
// 1 MiB, and around twice hugeStep (taken whole, or grown).
func frameSizeOf(v uint16) int {
	switch v >> 14 {
	case 0:
		return int(v & 0x3FF) // 0 … 1023
	case 1:
		return largeRead - frame.LengthPrefixSize - 512 + int(v&0x3FF)
	case 2:
		return int(v&0x3FFF) * 64 // 0 … 1 MiB
	default:
		return 2*hugeStep - 8192 + int(v&0x3FFF)
	}
}

// cutReader returns b in reads of the fuzzed sizes, in turn: a byte r
// below 128 is r+1 bytes, above it (r-127) × 4 KiB.
type cutReader struct {
	b     []byte
	sizes []byte
	i     int
	least int // the smallest read but the last
}

func (c *cutReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := len(p)
	if len(c.sizes) > 0 {
		r := int(c.sizes[c.i%len(c.sizes)])
		c.i++
		if r < 128 {
			n = min(n, r+1)
		} else {
			n = min(n, (r-127)<<12)
		}
		n = min(len(p), max(n, c.least))
	}
	n = copy(p[:n], c.b)
	c.b = c.b[n:]
	return n, nil
}
