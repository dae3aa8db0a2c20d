package seglog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// Frame layout, docs: seglog/doc.go "Records".
func TestFrameTable(t *testing.T) {
	valid := appendRecord(nil, 7, []byte("hello"))
	for _, tc := range []struct {
		name    string
		buf     []byte
		wantErr error
		wantOff uint64
		body    string
	}{
		// Good frames.
		{name: "simple", buf: valid, wantOff: 7, body: "hello"},
		{name: "empty body", buf: appendRecord(nil, 0, nil), wantOff: 0, body: ""},
		{name: "trailing bytes ignored", buf: append(append([]byte{}, valid...), 1, 2, 3), wantOff: 7, body: "hello"},
		// Truncated frames.
		{name: "empty buffer", buf: nil, wantErr: errShort},
		{name: "half header", buf: valid[:10], wantErr: errShort},
		{name: "header only", buf: valid[:headerSize], wantErr: errShort},
		{name: "padding missing", buf: valid[:headerSize+5], wantErr: errShort},
		// Never-written space.
		{name: "zeros", buf: make([]byte, 64), wantErr: errZero},
		{name: "few zeros", buf: make([]byte, 8), wantErr: errZero},
		// Damaged frames.
		{name: "bad version", buf: mutate(valid, 4, 9), wantErr: errHeader},
		{name: "bad type", buf: mutate(valid, 5, 9), wantErr: errHeader},
		{name: "reserved set", buf: mutate(valid, 6, 1), wantErr: errHeader},
		{name: "huge length", buf: mutate(valid, 3, 0x7f), wantErr: errHeader},
		{name: "flipped body", buf: mutate(valid, headerSize, 'j'), wantErr: errChecksum},
		{name: "flipped offset", buf: mutate(valid, 8, 8), wantErr: errChecksum},
		{name: "flipped crc", buf: mutate(valid, 16, 0), wantErr: errChecksum},
		{name: "dirty padding", buf: mutate(valid, len(valid)-1, 1), wantErr: errHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off, body, size, err := decodeRecord(tc.buf, 1<<20)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if off != tc.wantOff || string(body) != tc.body || size != frameSize(len(body)) {
				t.Fatalf("got (%d, %q, %d)", off, body, size)
			}
		})
	}
}

func TestFrameAlignment(t *testing.T) {
	for n := 0; n < 40; n++ {
		b := appendRecord(nil, uint64(n), bytes.Repeat([]byte{0xAB}, n))
		if len(b)%8 != 0 || len(b) != frameSize(n) {
			t.Fatalf("body %d: frame %d bytes", n, len(b))
		}
		if binary.LittleEndian.Uint32(b) != uint32(n) {
			t.Fatalf("length field wrong")
		}
		if !allZero(b[headerSize+n:]) {
			t.Fatalf("padding not zero")
		}
	}
}

func mutate(b []byte, i int, v byte) []byte {
	c := append([]byte{}, b...)
	c[i] = v
	return c
}

// FuzzDecodeRecord: any input decodes to a record or an error, never a
// panic, and a decoded record re-encodes to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendRecord(nil, 1, []byte("seed")))
	f.Add(appendRecord(appendRecord(nil, 1, []byte("a")), 2, bytes.Repeat([]byte("b"), 100)))
	f.Add(make([]byte, 24))
	f.Add(appendGap(nil, 7, 3))
	f.Fuzz(func(t *testing.T, buf []byte) {
		if fr, err := decodeFrame(buf, 1<<20); err == nil && fr.gap > 0 {
			if again := appendGap(nil, fr.offset, fr.gap); !bytes.Equal(again, buf[:fr.size]) {
				t.Fatalf("gap frame re-encodes differently")
			}
			if _, _, _, err := decodeRecord(buf, 1<<20); err == nil {
				t.Fatalf("decodeRecord accepted a gap frame")
			}
			return
		}
		off, body, size, err := decodeRecord(buf, 1<<20)
		if err != nil {
			return
		}
		if size > len(buf) || size%8 != 0 {
			t.Fatalf("size %d for %d bytes", size, len(buf))
		}
		again := appendRecord(nil, off, body)
		if !bytes.Equal(again, buf[:size]) {
			t.Fatalf("re-encoding differs")
		}
	})
}
