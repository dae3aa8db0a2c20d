package storedmsg_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/storedmsg"
	"github.com/sluicehq/sluice/internal/testkit/fuzzseed"
)

// hdr builds a header by hand, independently of Append.
func hdr(codec byte, dict uint32, id uint64, count uint32, agent string) []byte {
	b := []byte{'S', 'M', 1, codec}
	b = append(b, byte(dict), byte(dict>>8), byte(dict>>16), byte(dict>>24))
	for i := range 8 {
		b = append(b, byte(id>>(8*i)))
	}
	b = append(b, byte(count), byte(count>>8), byte(count>>16), byte(count>>24))
	b = append(b, byte(len(agent)), byte(len(agent)>>8))
	return append(b, agent...)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestDecode(t *testing.T) {
	body := []byte{0xB1, 0x01, 0x01, 0x01, 'x'}
	long := strings.Repeat("a", storedmsg.MaxAgentID)
	tests := []struct {
		name string
		in   []byte
		want storedmsg.Message
		// errAt is the FormatError offset expected, or -1 for success.
		errAt  int
		reason string
	}{
		// Valid records, one per codec.
		{name: "plain", in: cat(hdr(1, 0, 7, 1, "edge-1"), body),
			want: storedmsg.Message{Codec: codec.Plain, MessageID: 7, RecordCount: 1, AgentID: []byte("edge-1"), Body: body}, errAt: -1},
		{name: "zstd", in: cat(hdr(2, 0, 1<<40, 3, "a"), []byte{0x28, 0xB5, 0x2F, 0xFD}),
			want: storedmsg.Message{Codec: codec.Zstd, MessageID: 1 << 40, RecordCount: 3, AgentID: []byte("a"), Body: []byte{0x28, 0xB5, 0x2F, 0xFD}}, errAt: -1},
		{name: "zstd dict", in: cat(hdr(3, 40000, 0, 0, "agent"), []byte("frame")),
			want: storedmsg.Message{Codec: codec.ZstdDict, DictID: 40000, AgentID: []byte("agent"), Body: []byte("frame")}, errAt: -1},
		{name: "empty body", in: hdr(1, 0, 1, 0, "a"),
			want: storedmsg.Message{Codec: codec.Plain, MessageID: 1, AgentID: []byte("a"), Body: []byte{}}, errAt: -1},
		{name: "longest agent id", in: cat(hdr(1, 0, 1, 1, long), body),
			want: storedmsg.Message{Codec: codec.Plain, MessageID: 1, RecordCount: 1, AgentID: []byte(long), Body: body}, errAt: -1},

		// Header damage.
		{name: "empty", in: nil, errAt: 0, reason: "shorter than"},
		{name: "short header", in: hdr(1, 0, 1, 1, "a")[:21], errAt: 21, reason: "shorter than"},
		{name: "bad magic", in: cat([]byte("XM"), hdr(1, 0, 1, 1, "a")[2:]), errAt: 0, reason: "bad magic"},
		{name: "bad version", in: cat([]byte{'S', 'M', 2}, hdr(1, 0, 1, 1, "a")[3:]), errAt: 2, reason: "unsupported version 2"},
		{name: "unknown codec", in: hdr(4, 0, 1, 1, "a"), errAt: 3, reason: "unknown codec 4"},
		{name: "dict codec without dict", in: hdr(3, 0, 1, 1, "a"), errAt: 4, reason: "dictionary id 0"},
		{name: "dict id without dict codec", in: hdr(2, 9, 1, 1, "a"), errAt: 4, reason: "dictionary id 9 with codec zstd"},
		{name: "empty agent id", in: hdr(1, 0, 1, 1, ""), errAt: 20, reason: "empty agent id"},
		{name: "agent id too long", in: hdr(1, 0, 1, 1, long+"b"), errAt: 20, reason: "256 bytes"},
		{name: "agent id cut short", in: hdr(1, 0, 1, 1, "abcdef")[:25], errAt: 22, reason: "only 3 left"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := storedmsg.Decode(tt.in)
			if tt.errAt < 0 {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if got.Codec != tt.want.Codec || got.DictID != tt.want.DictID || got.MessageID != tt.want.MessageID ||
					got.RecordCount != tt.want.RecordCount || !bytes.Equal(got.AgentID, tt.want.AgentID) || !bytes.Equal(got.Body, tt.want.Body) {
					t.Fatalf("Decode = %+v, want %+v", got, tt.want)
				}
				re, err := storedmsg.Append(nil, &got)
				if err != nil || !bytes.Equal(re, tt.in) {
					t.Fatalf("re-encoding gives % X, %v; want % X", re, err, tt.in)
				}
				return
			}
			var fe *storedmsg.FormatError
			if !errors.As(err, &fe) || !errors.Is(err, storedmsg.ErrMalformed) {
				t.Fatalf("Decode error = %v, want a *FormatError", err)
			}
			if fe.Offset != tt.errAt || !strings.Contains(fe.Reason, tt.reason) {
				t.Fatalf("Decode error at %d %q, want at %d containing %q", fe.Offset, fe.Reason, tt.errAt, tt.reason)
			}
		})
	}
}

// TestDecodeAliases checks Decode copies nothing: AgentID and Body point
// into the input and cannot be appended to over each other.
func TestDecodeAliases(t *testing.T) {
	in := cat(hdr(1, 0, 1, 1, "agent"), []byte("body"))
	m, err := storedmsg.Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	if &m.AgentID[0] != &in[storedmsg.HeaderSize] || &m.Body[0] != &in[storedmsg.HeaderSize+5] {
		t.Fatal("Decode copied instead of aliasing its input")
	}
	if cap(m.AgentID) != len(m.AgentID) {
		t.Fatalf("AgentID cap %d > len %d: appending would overwrite the body", cap(m.AgentID), len(m.AgentID))
	}
}

func TestAppendRejects(t *testing.T) {
	tests := []struct {
		name string
		m    storedmsg.Message
	}{
		{"unknown codec", storedmsg.Message{Codec: 7, AgentID: []byte("a")}},
		{"dict without id", storedmsg.Message{Codec: codec.ZstdDict, AgentID: []byte("a")}},
		{"id without dict", storedmsg.Message{Codec: codec.Plain, DictID: 3, AgentID: []byte("a")}},
		{"no agent", storedmsg.Message{}},
		{"long agent", storedmsg.Message{AgentID: bytes.Repeat([]byte("a"), 256)}},
	}
	for _, tt := range tests {
		dst := []byte("keep")
		out, err := storedmsg.Append(dst, &tt.m)
		if !errors.Is(err, storedmsg.ErrMalformed) || string(out) != "keep" {
			t.Errorf("%s: Append = %q, %v; want dst unchanged and ErrMalformed", tt.name, out, err)
		}
	}
}

func TestAppendAllocs(t *testing.T) {
	m := storedmsg.Message{Codec: codec.ZstdDict, DictID: 5, MessageID: 9, RecordCount: 2,
		AgentID: []byte("edge-7"), Body: bytes.Repeat([]byte("x"), 1000)}
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		buf, err = storedmsg.Append(buf[:0], &m)
		if err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Append allocates %.1f times per call with a reused dst", allocs)
	}
	if len(buf) != m.Size() {
		t.Fatalf("Append wrote %d bytes, Size says %d", len(buf), m.Size())
	}
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := storedmsg.Decode(buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Decode allocates %.1f times per call", allocs)
	}
}

// FuzzDecode feeds arbitrary bytes to Decode. It must not panic; an error
// must be a *FormatError with an offset within the input; and a record that
// decodes must re-encode to exactly the input (one encoding per message).
//
// Seeds are in testdata/fuzz/FuzzDecode, valid records among them.
func FuzzDecode(f *testing.F) {
	f.Add(cat(hdr(1, 0, 1, 1, "a"), []byte{0xB1, 0x01, 0x01, 0x00}))
	f.Add(hdr(3, 1, 1, 1, "agent"))
	buf := make([]byte, 0, 1024)
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := storedmsg.Decode(in)
		if err != nil {
			var fe *storedmsg.FormatError
			if !errors.As(err, &fe) || !errors.Is(err, storedmsg.ErrMalformed) {
				t.Fatalf("Decode error %v (%T) is not a *FormatError", err, err)
			}
			if fe.Offset < 0 || fe.Offset > len(in) {
				t.Fatalf("error offset %d outside the %d-byte input", fe.Offset, len(in))
			}
			return
		}
		buf, err = storedmsg.Append(buf[:0], &m)
		if err != nil {
			t.Fatalf("Append of a decoded message: %v", err)
		}
		if !bytes.Equal(buf, in) {
			t.Fatalf("re-encoded % X, input % X", buf, in)
		}
	})
}

// TestFuzzCorpus keeps the committed seed corpus honest: files named valid-*
// hold records that decode, files named bad-* records that do not.
func TestFuzzCorpus(t *testing.T) {
	fuzzseed.Check(t, filepath.Join("testdata", "fuzz", "FuzzDecode"), storedmsg.ErrMalformed, 3, 3, func(in []byte) error {
		_, err := storedmsg.Decode(in)
		return err
	})
}

func ExampleAppend() {
	m := storedmsg.Message{Codec: codec.Plain, MessageID: 42, RecordCount: 1,
		AgentID: []byte("edge-1"), Body: []byte{0xB1, 0x01, 0x01, 0x02, 'h', 'i'}}
	rec, _ := storedmsg.Append(nil, &m)
	got, _ := storedmsg.Decode(rec)
	os.Stdout.WriteString(string(got.AgentID) + " " + strconv.FormatUint(got.MessageID, 10) + " " + got.Codec.String() + "\n")
	// Output: edge-1 42 plain
}
