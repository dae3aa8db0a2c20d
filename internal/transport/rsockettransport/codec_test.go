package rsockettransport

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/internal/protocol"
)

// frames has one of every frame type, with every optional part set.
var frames = []protocol.Frame{
	&protocol.Hello{AgentID: "agent-1", Version: protocol.Version, Codecs: []protocol.Codec{protocol.CodecPlain, protocol.CodecZstdDict}, DictionaryIDs: []uint32{1, 1 << 31}, Watermark: 1<<63 + 5},
	&protocol.Hello{AgentID: "a"},
	&protocol.Hello{AgentID: "fresh", Version: protocol.Version, HasSentBelow: true},
	&protocol.Hello{AgentID: "b", Version: protocol.Version, Watermark: 7, SentBelow: 1<<64 - 1, HasSentBelow: true},
	&protocol.Message{ID: 42, Records: 3, Codec: protocol.CodecZstdDict, DictID: 9, Payload: []byte("batch bytes")},
	&protocol.Dictionary{ID: 9, Data: []byte("dict")},
	&protocol.Welcome{Version: 1, Credits: protocol.Credits{Messages: 64, Bytes: 1 << 30}, MaxMessageBytes: 4 << 20, DictionaryIDs: []uint32{9}, SessionID: "s-1"},
	&protocol.Welcome{Version: 1, SessionID: "s-2", Codec: protocol.CodecKafkaZstd},
	&protocol.Message{ID: 43, Records: 2, Codec: protocol.CodecKafkaZstd, Payload: []byte("records section")},
	&protocol.Ack{Ranges: []protocol.IDRange{{First: 1, Last: 1}, {First: 3, Last: 1<<64 - 1}}},
	&protocol.Ack{},
	&protocol.Credit{Credits: &protocol.Credits{Messages: 1, Bytes: 2}, QueueCapacity: 7, DictionaryIDs: []uint32{3}, Store: &protocol.StoreStatus{Available: true, Detail: "ok"}},
	&protocol.Credit{QueueCapacity: 1},
	&protocol.Error{MessageID: 5, Code: protocol.CodeStoreUnavailable, Detail: "down", Retryable: true},
	&protocol.Error{MessageID: 6, Code: protocol.CodeOverCredit, Credits: &protocol.Credits{Messages: 3, Bytes: 4}},
	&protocol.ReadStart{From: 10, FromCommitted: true, Follow: true, Group: "g"},
	&protocol.ReadMore{N: 1<<32 - 1},
	&protocol.Commit{Offset: 77},
	&protocol.Stored{Offset: 3, AgentID: "a", MessageID: 8, Records: [][]byte{[]byte("r1"), {}, []byte("r3")}},
	&protocol.EndOfLog{Next: 4},
}

func TestRoundTrip(t *testing.T) {
	for _, f := range frames {
		h, b, err := Encode(nil, f)
		if err != nil {
			t.Fatalf("%s: %v", protocol.Name(f), err)
		}
		got, err := Decode(h, b)
		if err != nil {
			t.Fatalf("%s: %v", protocol.Name(f), err)
		}
		if !reflect.DeepEqual(got, f) {
			t.Fatalf("%s:\n got %#v\nwant %#v", protocol.Name(f), got, f)
		}
	}
}

// A Message's payload travels as the body: encoded and decoded without a copy.
func TestPayloadNotCopied(t *testing.T) {
	p := []byte("payload")
	_, b, _ := Encode(nil, &protocol.Message{ID: 1, Payload: p})
	if &b[0] != &p[0] {
		t.Fatal("Encode copied the payload")
	}
	h, _, _ := Encode(nil, &protocol.Message{ID: 1})
	m, _ := Decode(h, p)
	if &m.(*protocol.Message).Payload[0] != &p[0] {
		t.Fatal("Decode copied the payload")
	}
}

func TestDecodeRejects(t *testing.T) {
	hello, _, _ := Encode(nil, frames[0])
	helloNext, _, _ := Encode(nil, frames[3]) // the optional bound on sent ids is its last field
	for name, c := range map[string][2][]byte{
		"empty":              {nil, nil},
		"unknown type":       {{99}, nil},
		"truncated":          {hello[:len(hello)-1], nil},
		"trailing bytes":     {append(append([]byte(nil), helloNext...), 0), nil},
		"body on hello":      {hello, []byte("x")},
		"huge count":         {{typeAck, 0xff, 0xff, 0xff, 0xff, 0x0f}, nil},
		"ack overflow":       {{typeAck, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 2}, nil},
		"error flags":        {{typeError, 1, 1, 0, 4}, nil},
		"bad bool":           {{typeCredit, creditHasStore, 0, 0, 2, 0}, nil},
		"credit flags":       {{typeCredit, 0x80, 0, 0}, nil},
		"readmore > 32 bits": {{typeReadMore, 0x80, 0x80, 0x80, 0x80, 0x10}, nil},
		"stored records":     {{typeStored, 0, 0, 0, 2}, []byte{1, 'a'}},
		"stored short":       {{typeStored, 0, 0, 0, 1}, []byte{5, 'a'}},
	} {
		if _, err := Decode(c[0], c[1]); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, _, err := Encode(nil, &protocol.Ack{Ranges: []protocol.IDRange{{First: 2, Last: 1}}}); err == nil {
		t.Error("reversed range encoded")
	}
}

// FuzzDecode: no input panics, and what decodes encodes to a frame that
// decodes the same (the corpus in testdata/fuzz has a seed per type).
func FuzzDecode(f *testing.F) {
	for _, fr := range frames {
		h, b, _ := Encode(nil, fr)
		f.Add(h, b)
	}
	f.Fuzz(func(t *testing.T, header, body []byte) {
		fr, err := Decode(header, body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not wrapping ErrMalformed: %v", err)
			}
			return
		}
		h, b, err := Encode(nil, fr)
		if err != nil {
			t.Fatalf("decoded %#v does not encode: %v", fr, err)
		}
		again, err := Decode(h, bytes.Clone(b))
		if err != nil || !reflect.DeepEqual(normalize(again), normalize(fr)) {
			t.Fatalf("re-decode: %#v %v, want %#v", again, err, fr)
		}
	})
}

// normalize maps empty byte slices to nil, which the codec does not tell apart.
func normalize(f protocol.Frame) protocol.Frame {
	switch f := f.(type) {
	case *protocol.Message:
		if len(f.Payload) == 0 {
			f.Payload = nil
		}
	case *protocol.Dictionary:
		if len(f.Data) == 0 {
			f.Data = nil
		}
	case *protocol.Stored:
		for i, r := range f.Records {
			if len(r) == 0 {
				f.Records[i] = []byte{}
			}
		}
	}
	return f
}

// TestWelcomeWithoutCodecIsTheOldFrame: a Welcome that asks for no codec
// encodes exactly as before the codec byte existed, so an agent of an
// older version (whose decoder refuses bytes after the session id) still
// reads it; one that asks for a codec has the one byte more.
func TestWelcomeWithoutCodecIsTheOldFrame(t *testing.T) {
	w := &protocol.Welcome{Version: 1, SessionID: "s"}
	old, _, err := Encode(nil, w)
	if err != nil {
		t.Fatal(err)
	}
	w.Codec = protocol.CodecKafkaZstd
	asked, _, err := Encode(nil, w)
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != len(old)+1 || !bytes.Equal(asked[:len(old)], old) || asked[len(old)] != byte(protocol.CodecKafkaZstd) {
		t.Fatalf("without codec %x, with %x", old, asked)
	}
}
