package rsocketxfer

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/rsocket"
)

func TestWireRoundTrip(t *testing.T) {
	sum := bytes.Repeat([]byte{0xab}, sha256Len)
	for _, b := range []Begin{
		{Name: "a.bin", Size: 1 << 40, Offset: 12345},
		{Name: "dir/ü.bin", Size: 0, Offset: 0, SHA256: sum},
		{Name: "", Size: -1, Offset: -2},
	} {
		got, err := DecodeBegin(AppendBegin(nil, b))
		if err != nil || got.Name != b.Name || got.Size != b.Size || got.Offset != b.Offset || !bytes.Equal(got.SHA256, b.SHA256) {
			t.Errorf("begin %+v came back as %+v, %v", b, got, err)
		}
	}
	for _, name := range []string{"a.bin", ""} {
		if got, err := DecodeOffsetRequest(AppendOffsetRequest(nil, name)); err != nil || got != name {
			t.Errorf("offset request %q came back as %q, %v", name, got, err)
		}
	}
	for _, a := range []OffsetAnswer{{}, {Offset: 1 << 20, Size: 3 << 30, Exists: true}} {
		if got, err := DecodeOffsetAnswer(AppendOffsetAnswer(nil, a)); err != nil || got != a {
			t.Errorf("offset answer %+v came back as %+v, %v", a, got, err)
		}
	}
	for _, a := range []UploadAnswer{{Offset: 7 << 20}, {Offset: 9, Done: true, SHA256: sum}} {
		got, err := DecodeUploadAnswer(AppendUploadAnswer(nil, a))
		if err != nil || got.Offset != a.Offset || got.Done != a.Done || !bytes.Equal(got.SHA256, a.SHA256) {
			t.Errorf("upload answer %+v came back as %+v, %v", a, got, err)
		}
	}
	if crc, err := decodeChunkMeta(AppendChunkMeta(nil, 0xdeadbeef)); err != nil || crc != 0xdeadbeef {
		t.Errorf("chunk metadata came back as %#x, %v", crc, err)
	}
}

// The decoders refuse what is short, of another kind or malformed, and
// never read past the message.
func TestWireRefusesMalformed(t *testing.T) {
	begin := AppendBegin(nil, Begin{Name: "x", SHA256: make([]byte, sha256Len)})
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"empty", decodeErr(DecodeBegin(nil))},
		{"header only", decodeErr(DecodeBegin([]byte{WireVersion, kindBegin}))},
		{"begin cut in its SHA-256", decodeErr(DecodeBegin(begin[:beginMinLen+10]))},
		{"begin with a 5-byte SHA-256", decodeErr(DecodeBegin(append(AppendBegin(nil, Begin{})[:beginMinLen-1], 5, 1, 2, 3, 4, 5)))},
		{"an offset request as a begin", decodeErr(DecodeBegin(AppendOffsetRequest(nil, "long enough to be a begin")))},
		{"offset answer too long", decodeErr(DecodeOffsetAnswer(append(AppendOffsetAnswer(nil, OffsetAnswer{}), 0)))},
		{"offset answer exists=2", decodeErr(DecodeOffsetAnswer(append([]byte{WireVersion, kindOffsetAnswer, 2}, make([]byte, 16)...)))},
		{"done without its SHA-256", decodeErr(DecodeUploadAnswer(AppendUploadAnswer(nil, UploadAnswer{Done: true})))},
		{"ack of another kind", decodeErr(DecodeUploadAnswer([]byte{WireVersion, 'x', 0, 0, 0, 0, 0, 0, 0, 0}))},
	} {
		if tc.err == nil {
			t.Errorf("%s: decoded", tc.what)
		}
	}
	if _, err := decodeChunkMeta([]byte{metaChunk, 1, 2}); err == nil {
		t.Error("short chunk metadata decoded")
	}
}

func decodeErr[T any](_ T, err error) error { return err }

// A chunk's metadata and an upload's answers are decoded without
// allocating: one per chunk, one per checkpoint.
func TestWireHotPathDecodesWithoutAllocating(t *testing.T) {
	meta := AppendChunkMeta(nil, 42)
	ack := AppendUploadAnswer(nil, UploadAnswer{Offset: 1 << 20})
	var sink int64
	allocs := testing.AllocsPerRun(100, func() {
		crc, _ := decodeChunkMeta(meta)
		a, _ := DecodeUploadAnswer(ack)
		sink += int64(crc) + a.Offset
	})
	if allocs != 0 {
		t.Errorf("%v allocations per chunk and ack decoded, want 0", allocs)
	}
	_ = sink
}

// A peer of the protobuf era, or of a later wire version, gets an error
// that says so, and the client does not retry it.
func TestWireVersionMismatchIsClear(t *testing.T) {
	// An xfer.v1.OffsetRequest{Name: "a"} as protobuf: field 1, length 1.
	old := []byte{0x0a, 1, 'a'}
	r := &Responder{}
	_, err := r.RequestResponse(context.Background(), rsocket.Payload{Metadata: []byte(MetaOffset), Data: old})
	if err == nil || !strings.Contains(err.Error(), "wire version 10") || !strings.Contains(err.Error(), "predates") {
		t.Errorf("the server's answer to a protobuf offset request: %v", err)
	}
	var pe *xfer.PermanentError
	if err := fromRSocket(err); !errors.As(err, &pe) {
		t.Errorf("the client takes the version refusal for retryable: %v", err)
	}
	// How a protobuf-era server refuses our offset request.
	err = fromRSocket(rsocket.ApplicationError("bad offset request: proto: cannot parse invalid wire-format data"))
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "older protobuf encoding") {
		t.Errorf("the client's error for a protobuf-era server: %v", err)
	}
	// An answer of a later version.
	_, err = DecodeOffsetAnswer(append([]byte{WireVersion + 1}, AppendOffsetAnswer(nil, OffsetAnswer{})[1:]...))
	if err = badAnswer("offset", err); !errors.As(err, &pe) || !strings.Contains(err.Error(), "wire version 2") {
		t.Errorf("the client's error for an answer of version 2: %v", err)
	}
}

// laterServer answers every offset request in a later wire version.
type laterServer struct{ rsocket.UnimplementedResponder }

func (laterServer) RequestResponse(context.Context, rsocket.Payload) (rsocket.Payload, error) {
	return rsocket.Payload{Data: append([]byte{WireVersion + 1}, AppendOffsetAnswer(nil, OffsetAnswer{})[1:]...)}, nil
}

// Through a connection: the client's Offset fails for good against a
// server of another version.
func TestClientRefusesAnswerOfAnotherVersion(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go rsocket.Serve(ctx, ln, laterServer{})
	c := NewClient("tcp://" + ln.Addr().String())
	defer c.Close()
	_, _, _, err = c.Offset(ctx, "a")
	var pe *xfer.PermanentError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "wire version 2") {
		t.Errorf("Offset against a version-2 server: %v", err)
	}
}
