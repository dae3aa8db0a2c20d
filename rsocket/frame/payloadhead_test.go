package frame

import (
	"bytes"
	"errors"
	"testing"
)

// payloadBytes is a length-prefixed PAYLOAD as AppendPayload encodes it.
func payloadBytes(stream uint32, flags Flags, md, data []byte) ([]byte, error) {
	b, err := AppendPayload(ReserveLengthPrefix(nil), stream, flags, md, data)
	if err != nil {
		return nil, err
	}
	return b, SetLengthPrefix(b, 0)
}

// AppendPayloadHead followed by the data is AppendPayload's frame with its
// length prefix, byte for byte: a driver that writes the data from the
// caller's memory after the head sends what the copying path sends.
func TestAppendPayloadHeadThenDataIsAppendPayload(t *testing.T) {
	data := bytes.Repeat([]byte("d"), 70000)
	for _, c := range []struct {
		flags Flags
		md    []byte
	}{{FlagNext, nil}, {FlagNext, []byte{}}, {FlagNext | FlagComplete, []byte("meta")}, {FlagComplete, nil}} {
		want, err := payloadBytes(7, c.flags, c.md, data)
		if err != nil {
			t.Fatal(err)
		}
		head, err := AppendPayloadHead([]byte("x"), 7, c.flags, c.md, len(data))
		if err != nil {
			t.Fatal(err)
		}
		if got := append(head[1:], data...); !bytes.Equal(got, want) {
			t.Fatalf("flags %v metadata %q: head+data %x..., AppendPayload %x...", c.flags, c.md, got[:16], want[:16])
		}
	}
	if _, err := AppendPayloadHead(nil, 7, FlagNext, nil, MaxFrameSize); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("a frame over MaxFrameSize: %v", err)
	}
	if _, err := AppendPayloadHead(nil, 0, FlagNext, nil, 10); !errors.Is(err, ErrStreamID) {
		t.Fatalf("stream 0: %v", err)
	}
}

// FuzzAppendPayloadHead holds AppendPayloadHead and AppendPayload to the
// same bytes and the same refusals.
func FuzzAppendPayloadHead(f *testing.F) {
	f.Add(uint32(1), uint16(FlagNext), true, []byte("md"), []byte("data"))
	f.Add(uint32(0), uint16(0), false, []byte(nil), []byte(nil))
	f.Fuzz(func(t *testing.T, stream uint32, flags uint16, hasMD bool, md, data []byte) {
		if !hasMD {
			md = nil
		} else if md == nil {
			md = []byte{}
		}
		want, werr := payloadBytes(stream, Flags(flags), md, data)
		head, err := AppendPayloadHead(nil, stream, Flags(flags), md, len(data))
		if (werr != nil) != (err != nil) {
			t.Fatalf("AppendPayload: %v, AppendPayloadHead: %v", werr, err)
		}
		if err == nil && !bytes.Equal(append(head, data...), want) {
			t.Fatal("head+data differs from AppendPayload")
		}
	})
}
