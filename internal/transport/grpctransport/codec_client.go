package grpctransport

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
)

// ClientCodec is the codec of the agent's Send streams (forced per stream
// with grpc.ForceCodecV2, so it holds however the connection was dialed).
// It is gRPC's proto codec, except for an ownedRequest: see marshalOwned.
func ClientCodec() encoding.CodecV2 { return clientCodec{} }

type clientCodec struct{}

func (clientCodec) Name() string { return "proto" }

func (clientCodec) Marshal(v any) (mem.BufferSlice, error) {
	if o, ok := v.(*ownedRequest); ok {
		return o.marshal()
	}
	return encoding.GetCodecV2("proto").Marshal(v)
}

func (clientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

// ownedRequest is a Request whose payload lives in memory the sender hands
// over (a spool record): the codec encodes it as two buffers, the protobuf
// head and the payload itself, instead of copying the payload into one
// marshalled message. gRPC keeps a reference to the buffers until its
// writer goroutine has put them on the wire (or the stream is gone) and
// then frees them; the last free gives the record back (put), so the
// sender never reuses it while gRPC may still read it.
type ownedRequest struct {
	req *sluicev1.Request
	rec *[]byte       // the memory the payload aliases
	put func(*[]byte) // gives rec back; called once, by whoever is last
}

// payloadOwner is the payload's mem.Buffer pool: a pool of one, whose Put
// is the record's release.
type payloadOwner struct {
	p   []byte
	rec *[]byte
	put func(*[]byte)
}

func (o *payloadOwner) Get(n int) *[]byte { b := make([]byte, n); return &b } // never called by mem.Buffer
func (o *payloadOwner) Put(*[]byte)       { o.put(o.rec) }

// marshal encodes o.req exactly as proto.Marshal would (fields in number
// order, zero scalars omitted), the payload not copied. Payloads gRPC would
// not pool (mem.BufferPoolingThreshold), and requests other than a plain,
// zstd or kafka_zstd batch, are marshalled as usual and the record
// released at once.
func (o *ownedRequest) marshal() (mem.BufferSlice, error) {
	var num protowire.Number
	var payload []byte
	switch p := o.req.GetPayload().(type) {
	case *sluicev1.Request_Plain:
		num, payload = 9, p.Plain
	case *sluicev1.Request_Zstd:
		num, payload = 10, p.Zstd
	case *sluicev1.Request_KafkaZstd:
		num, payload = 13, p.KafkaZstd
	}
	if num == 0 || mem.IsBelowBufferPoolingThreshold(cap(payload)) {
		bs, err := encoding.GetCodecV2("proto").Marshal(o.req)
		o.put(o.rec)
		return bs, err
	}
	r := o.req
	hdr := make([]byte, 0, 40)
	if r.Version != 0 {
		hdr = protowire.AppendTag(hdr, 1, protowire.VarintType)
		hdr = protowire.AppendVarint(hdr, uint64(r.Version))
	}
	if r.MessageId != 0 {
		hdr = protowire.AppendTag(hdr, 2, protowire.VarintType)
		hdr = protowire.AppendVarint(hdr, r.MessageId)
	}
	if r.RecordCount != 0 {
		hdr = protowire.AppendTag(hdr, 3, protowire.VarintType)
		hdr = protowire.AppendVarint(hdr, uint64(r.RecordCount))
	}
	hdr = protowire.AppendTag(hdr, num, protowire.BytesType)
	hdr = protowire.AppendVarint(hdr, uint64(len(payload)))
	own := &payloadOwner{p: payload, rec: o.rec, put: o.put}
	return mem.BufferSlice{mem.SliceBuffer(hdr), mem.NewBuffer(&own.p, own)}, nil
}
