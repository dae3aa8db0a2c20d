package grpctransport

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
)

// FuzzServerCodecRequest holds the sink's aliasing decoder of agents'
// Requests (unmarshalRequest, behind ServerCodec) to protobuf's reading of
// the same bytes: for any input, the codec decodes what proto.Unmarshal
// decodes, fresh or into a Request reused from any earlier one, and fails
// where it fails. Every byte of a Request comes from the network, before
// any authentication.
func FuzzServerCodecRequest(f *testing.F) {
	for _, req := range []*sluicev1.Request{
		{Version: 1, MessageId: 7, RecordCount: 3, Payload: &sluicev1.Request_Plain{Plain: []byte("abc")}},
		{Version: 1, MessageId: 1 << 40, RecordCount: 1, Payload: &sluicev1.Request_Zstd{Zstd: []byte{9, 9, 9}}},
		{Version: 1, MessageId: 2, Payload: &sluicev1.Request_ZstdDict{ZstdDict: &sluicev1.ZstdDict{DictionaryId: 5, Data: []byte("z")}}},
		{Version: 1, Payload: &sluicev1.Request_Dictionary{Dictionary: &sluicev1.Dictionary{Id: 9, Data: []byte("dict")}}},
		{Version: 1, MessageId: 5, RecordCount: 1, Payload: &sluicev1.Request_KafkaZstd{KafkaZstd: []byte("k")}},
		{Version: 1, Payload: &sluicev1.Request_Hello{Hello: &sluicev1.Hello{AgentId: "a", ProtocolVersion: 1}}},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, 0)
	}
	// A message field of the payload given twice: protobuf merges the
	// two (the id of the first, the data of the second).
	twice := protowire.AppendTag(nil, 11, protowire.BytesType)
	twice = protowire.AppendBytes(twice, protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 5))
	twice = protowire.AppendTag(twice, 11, protowire.BytesType)
	twice = protowire.AppendBytes(twice, protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte("d")))
	f.Add(twice, 1)
	f.Fuzz(func(t *testing.T, b []byte, split int) {
		var want sluicev1.Request
		wantErr := proto.Unmarshal(b, &want)
		// Split where the fuzzer says, as gRPC hands over a message that
		// spans HTTP/2 frames.
		data := mem.BufferSlice{mem.SliceBuffer(b)}
		if len(b) > 0 {
			at := (split%len(b) + len(b)) % len(b)
			data = mem.BufferSlice{mem.SliceBuffer(b[:at]), mem.SliceBuffer(b[at:])}
		}
		reused := []*sluicev1.Request{{}, // fresh
			{Version: 3, MessageId: 9, RecordCount: 4, Payload: &sluicev1.Request_Plain{Plain: []byte("old")}},
			{Payload: &sluicev1.Request_Zstd{Zstd: []byte("old")}},
			{Payload: &sluicev1.Request_KafkaZstd{KafkaZstd: []byte("old")}},
			{Payload: &sluicev1.Request_ZstdDict{ZstdDict: &sluicev1.ZstdDict{DictionaryId: 1, Data: []byte("old")}}},
			{Payload: &sluicev1.Request_Hello{Hello: &sluicev1.Hello{AgentId: "old"}}},
		}
		// One left with unknown fields by an earlier decoding.
		unknown := &sluicev1.Request{}
		if err := proto.Unmarshal(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1), unknown); err != nil {
			t.Fatal(err)
		}
		reused = append(reused, unknown)
		for _, got := range reused {
			err := ServerCodec().Unmarshal(data, got)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("codec error %v, proto.Unmarshal's %v", err, wantErr)
			}
			if err == nil && !proto.Equal(got, &want) {
				t.Fatalf("codec decoded %v, proto.Unmarshal %v", got, &want)
			}
		}
		// What the aliasing decoder takes, it takes whole: a payload
		// aliases b, never memory past it.
		var r sluicev1.Request
		if unmarshalRequest(b, &r) {
			for _, p := range [][]byte{r.GetPlain(), r.GetZstd(), r.GetKafkaZstd(), r.GetZstdDict().GetData(), r.GetDictionary().GetData()} {
				if len(p) > 0 && !bytes.Contains(b, p) {
					t.Fatalf("payload %q not within the input", p)
				}
			}
		}
	})
}
