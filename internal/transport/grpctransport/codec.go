package grpctransport

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/protocol"
)

// ServerBufferPool is the pool a sink's gRPC server should receive and
// marshal in (grpc experimental.BufferPool); ServerCodec uses it too.
func ServerBufferPool() mem.BufferPool { return serverBufferPool }

// ServerCodec is the codec a sink's gRPC server should force
// (grpc.ForceServerCodecV2): see protoCodec.
func ServerCodec() encoding.CodecV2 { return protoCodec{} }

// serverBufferPool holds the buffers the sink's gRPC server marshals and
// receives messages in. gRPC's default pool has tiers of 256 B, 4, 16 and
// 32 KiB and 1 MiB, so every message between 32 KiB and 1 MiB takes a
// 1 MiB buffer: the StoredMessages queued for a consumer's connection held
// about 3 MB per consumer (200 followers catching up: 600 MB of heap).
// Tiers at every power of two up to 4 MiB waste at most half a buffer.
var serverBufferPool = func() mem.BufferPool {
	exps := make([]uint8, 0, 15)
	for e := uint8(8); e <= 22; e++ {
		exps = append(exps, e)
	}
	p, err := mem.NewBinaryTieredBufferPool(exps...)
	if err != nil {
		panic(err) // constant arguments
	}
	return p
}()

// protoCodec is gRPC's proto codec with serverBufferPool: gRPC's own always
// uses the process-wide default pool, which only a global setting changes.
// It also decodes a Request without copying its payload (see
// unmarshalRequest).
type protoCodec struct{}

func (protoCodec) Name() string { return "proto" }

func (protoCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("proto: cannot marshal %T, want proto.Message", v)
	}
	// Size first: UseCachedSize then reuses it.
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := serverBufferPool.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil {
		serverBufferPool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, serverBufferPool)}, nil
}

func (protoCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("proto: cannot unmarshal into %T, want proto.Message", v)
	}
	if req, ok := v.(*sluicev1.Request); ok {
		// One copy out of gRPC's frame buffers into memory the Request
		// then owns: the payload fields alias it, so the sink keeps the
		// batch as received until it is stored, with no further copy
		// (proto.Unmarshal would copy every bytes field once more).
		b := data.Materialize()
		if unmarshalRequest(b, req) {
			return nil
		}
		req.Reset()
		return proto.Unmarshal(b, req)
	}
	buf := data.MaterializeToBuffer(serverBufferPool)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// unmarshalRequest decodes b into req with its payload bytes aliasing b.
// It handles the batch and dictionary requests, which carry the bytes; it
// reports false for anything else (a Hello, unknown fields, malformed
// input), which the caller hands to proto.Unmarshal: the same result, and
// the same errors, as gRPC's own codec.
//
// A reused req keeps its payload wrapper (Request_Plain, Request_Zstd,
// Request_KafkaZstd) when the next request carries the same kind, so a
// stream of batches allocates nothing but the buffer itself.
func unmarshalRequest(b []byte, req *sluicev1.Request) bool {
	var (
		version, count uint32
		id             uint64
	)
	prev := req.Payload
	req.Payload = nil
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num <= 3 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			switch num {
			case 1:
				version = uint32(v)
			case 2:
				id = v
			case 3:
				count = uint32(v)
			default:
				return false
			}
		case num >= 9 && num <= 13 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			switch num {
			case 9:
				p, ok := prev.(*sluicev1.Request_Plain)
				if !ok {
					p = &sluicev1.Request_Plain{}
				}
				p.Plain, req.Payload = v[:len(v):len(v)], p
			case 10:
				p, ok := prev.(*sluicev1.Request_Zstd)
				if !ok {
					p = &sluicev1.Request_Zstd{}
				}
				p.Zstd, req.Payload = v[:len(v):len(v)], p
			case 11:
				dictID, data, ok := idAndData(v)
				if _, again := req.Payload.(*sluicev1.Request_ZstdDict); !ok || again {
					// A message field given twice is merged by
					// protobuf (FuzzServerCodecRequest): its reading.
					return false
				}
				req.Payload = &sluicev1.Request_ZstdDict{ZstdDict: &sluicev1.ZstdDict{DictionaryId: dictID, Data: data}}
			case 12:
				dictID, data, ok := idAndData(v)
				if _, again := req.Payload.(*sluicev1.Request_Dictionary); !ok || again {
					return false
				}
				req.Payload = &sluicev1.Request_Dictionary{Dictionary: &sluicev1.Dictionary{Id: dictID, Data: data}}
			case 13:
				p, ok := prev.(*sluicev1.Request_KafkaZstd)
				if !ok {
					p = &sluicev1.Request_KafkaZstd{}
				}
				p.KafkaZstd, req.Payload = v[:len(v):len(v)], p
			}
		default:
			return false
		}
	}
	req.Version, req.MessageId, req.RecordCount = version, id, count
	if m := req.ProtoReflect(); len(m.GetUnknown()) > 0 {
		m.SetUnknown(nil) // left by an earlier request decoded into req
	}
	return true
}

// idAndData decodes a ZstdDict or a Dictionary (uint32 id = 1; bytes data
// = 2), the data aliasing b.
func idAndData(b []byte) (id uint32, data []byte, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, nil, false
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, nil, false
			}
			id, b = uint32(v), b[n:]
		case num == 2 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, nil, false
			}
			data, b = v[:len(v):len(v)], b[n:]
		default:
			return 0, nil, false
		}
	}
	return id, data, true
}

// messageFromRequest fills m from a batch request (plain or zstd, the
// common case) of the current version, reporting false for anything else,
// which FrameFromRequest converts: the same frame, without allocating one
// per batch.
func messageFromRequest(m *protocol.Message, req *sluicev1.Request) bool {
	if req.GetVersion() != protocol.Version {
		return false
	}
	*m = protocol.Message{ID: req.GetMessageId(), Records: req.GetRecordCount()}
	switch p := req.GetPayload().(type) {
	case *sluicev1.Request_Plain:
		m.Codec, m.Payload = protocol.CodecPlain, p.Plain
	case *sluicev1.Request_Zstd:
		m.Codec, m.Payload = protocol.CodecZstd, p.Zstd
	case *sluicev1.Request_KafkaZstd:
		m.Codec, m.Payload = protocol.CodecKafkaZstd, p.KafkaZstd
	default:
		return false
	}
	return true
}
