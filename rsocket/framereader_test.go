package rsocket

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// frameReader returns every frame whole whatever the read sizes: tiny
// reads (the small buffer fills and a large one is taken), frames larger
// than the large buffer (read straight into dst, grown past hugeStep as
// the bytes come), and a cut-off frame is
// io.ErrUnexpectedEOF, a clean end io.EOF.
func TestFrameReader(t *testing.T) {
	sizes := []int{0, 1, 64, smallRead, smallRead + 1, largeRead - 3, largeRead, 3 * largeRead, 7, 3*hugeStep + 5, hugeStep, 9}
	var stream bytes.Buffer
	for i, n := range sizes {
		stream.Write([]byte{byte(n >> 16), byte(n >> 8), byte(n)})
		stream.Write(bytes.Repeat([]byte{byte(i + 1)}, n))
	}
	all := stream.Bytes()
	for name, r := range map[string]io.Reader{
		"one byte": iotest.OneByteReader(bytes.NewReader(all)),
		"half":     iotest.HalfReader(bytes.NewReader(all)),
		"whole":    bytes.NewReader(all),
	} {
		f := newFrameReader(r)
		var buf []byte
		for i, n := range sizes {
			fr, err := f.readFrame(buf)
			if err != nil {
				t.Fatalf("%s: frame %d: %v", name, i, err)
			}
			if !bytes.Equal(fr, bytes.Repeat([]byte{byte(i + 1)}, n)) {
				t.Fatalf("%s: frame %d: got %d bytes, want %d of %d", name, i, len(fr), n, i+1)
			}
			buf = fr[:0]
		}
		if _, err := f.readFrame(buf); err != io.EOF {
			t.Fatalf("%s: after the last frame: %v, want io.EOF", name, err)
		}
	}
	// Cut inside a prefix, inside a small frame, inside a huge frame.
	for _, b := range [][]byte{{0, 0}, {0, 0, 9, 1, 2}, append([]byte{0x04, 0, 0}, make([]byte, largeRead+5)...)} {
		f := newFrameReader(bytes.NewReader(b))
		if _, err := f.readFrame(nil); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut frame %x...: %v, want io.ErrUnexpectedEOF", b[:min(len(b), 5)], err)
		}
	}
}

// maxReadLen records the largest buffer a Read was given, then ends the
// stream.
type maxReadLen struct {
	r   io.Reader
	max int
}

func (m *maxReadLen) Read(p []byte) (int, error) {
	m.max = max(m.max, len(p))
	return m.r.Read(p)
}

// TestFrameReaderDeclaredLengthCostsLittle: a peer that declares a
// 16 MiB frame and sends 100 bytes of it makes the reader hold about
// hugeStep, not 16 MiB (it did: the whole frame was allocated from the
// prefix, on every connection, before SETUP).
func TestFrameReaderDeclaredLengthCostsLittle(t *testing.T) {
	n := 1<<24 - 1
	r := &maxReadLen{r: bytes.NewReader(append([]byte{byte(n >> 16), byte(n >> 8), byte(n)}, make([]byte, 100)...))}
	if _, err := newFrameReader(r).readFrame(nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut frame: %v", err)
	}
	if r.max > hugeStep {
		t.Fatalf("a frame declared as %d bytes, of which 100 came, was read into a buffer of %d", n, r.max)
	}
}

// readSizes records how many bytes each Read asked for.
type readSizes struct {
	r     io.Reader
	asked []int
}

func (s *readSizes) Read(p []byte) (int, error) {
	s.asked = append(s.asked, len(p))
	return s.r.Read(p)
}

// TestFrameReaderLargeFramesNotCopied: after a frame larger than the
// reader's buffer, the next read into the buffer asks for at most
// smallRead bytes, so that of the next large frame (an upload's next
// chunk) only its first bytes land in the buffer and need copying into
// the frame's own; the rest is read straight there. Before, the reader
// filled its 64 KiB buffer and copied all of it. Frames still arrive
// whole, and small frames after large ones too.
func TestFrameReaderLargeFramesNotCopied(t *testing.T) {
	// The first frame is over smallRead, so the reader takes its large
	// buffer, as a connection busy with requests has.
	sizes := []int{1000, 3 * largeRead, 2 * largeRead, 2 * largeRead, 100, 5}
	var stream bytes.Buffer
	for i, n := range sizes {
		stream.Write([]byte{byte(n >> 16), byte(n >> 8), byte(n)})
		stream.Write(bytes.Repeat([]byte{byte(i + 1)}, n))
	}
	src := &readSizes{r: bytes.NewReader(stream.Bytes())}
	f := newFrameReader(src)
	for i, n := range sizes {
		before := len(src.asked)
		fr, err := f.readFrame(nil)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(fr, bytes.Repeat([]byte{byte(i + 1)}, n)) {
			t.Fatalf("frame %d: got %d bytes, want %d of %d", i, len(fr), n, i+1)
		}
		if i < 2 || i > 3 {
			continue
		}
		// Frames 2 and 3 follow a large frame: their first read into the
		// buffer takes the prefix and little more.
		if into := src.asked[before]; into > smallRead {
			t.Fatalf("frame %d, after a %d-byte frame: the first read asked %d bytes into the buffer, want at most %d", i, sizes[i-1], into, smallRead)
		}
	}
}
