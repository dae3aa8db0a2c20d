package grpctransport

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
)

// TestServerCodecRequest: the aliasing decoder reads every Request as
// proto.Unmarshal does, and its payload aliases the received buffer (no
// copy) for batches and dictionaries.
func TestServerCodecRequest(t *testing.T) {
	var reused sluicev1.Request // decoded into again and again, as the server's Recv does
	for _, req := range []*sluicev1.Request{
		{Version: 1, MessageId: 7, RecordCount: 3, Payload: &sluicev1.Request_Plain{Plain: []byte("abc")}},
		{Version: 1, MessageId: 1 << 40, RecordCount: 1, Payload: &sluicev1.Request_Zstd{Zstd: bytes.Repeat([]byte{9}, 70000)}},
		{Version: 1, MessageId: 2, Payload: &sluicev1.Request_ZstdDict{ZstdDict: &sluicev1.ZstdDict{DictionaryId: 5, Data: []byte("z")}}},
		{Version: 1, Payload: &sluicev1.Request_Dictionary{Dictionary: &sluicev1.Dictionary{Id: 9, Data: []byte("dict")}}},
		{Version: 1, MessageId: 4, RecordCount: 2, Payload: &sluicev1.Request_KafkaZstd{KafkaZstd: bytes.Repeat([]byte{7}, 70000)}},
		{Version: 1, MessageId: 5, RecordCount: 1, Payload: &sluicev1.Request_KafkaZstd{KafkaZstd: []byte("k")}},
		{Version: 1, Payload: &sluicev1.Request_Plain{}},
		{Version: 2, MessageId: 3},
		{},
		{Version: 1, Payload: &sluicev1.Request_Hello{Hello: &sluicev1.Hello{AgentId: "a", ProtocolVersion: 1}}},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		// Split in two buffers, as gRPC hands over a message that spans
		// HTTP/2 frames.
		half := len(b) / 2
		data := mem.BufferSlice{mem.SliceBuffer(b[:half]), mem.SliceBuffer(b[half:])}
		var got sluicev1.Request
		if err := ServerCodec().Unmarshal(data, &got); err != nil {
			t.Fatalf("%v: %v", req, err)
		}
		if !proto.Equal(&got, req) {
			t.Fatalf("decoded %v, want %v", &got, req)
		}
		if err := ServerCodec().Unmarshal(data, &reused); err != nil {
			t.Fatalf("%v: %v", req, err)
		}
		if !proto.Equal(&reused, req) {
			t.Fatalf("decoded into a reused Request: %v, want %v", &reused, req)
		}
	}
	// Malformed input fails as it does with proto.Unmarshal.
	var r sluicev1.Request
	if err := ServerCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x4a, 0x05, 'a'})}, &r); err == nil {
		t.Fatal("a truncated payload decoded")
	}
}

func TestUnmarshalRequestAliases(t *testing.T) {
	b, _ := proto.Marshal(&sluicev1.Request{Version: 1, MessageId: 1, RecordCount: 1, Payload: &sluicev1.Request_Zstd{Zstd: []byte("payload")}})
	var r sluicev1.Request
	if !unmarshalRequest(b, &r) {
		t.Fatal("not decoded")
	}
	p := r.GetZstd()
	if &p[0] != &b[len(b)-len(p)] {
		t.Fatal("the payload was copied")
	}
}
