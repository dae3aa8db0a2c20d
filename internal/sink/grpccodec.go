package sink

import (
	"fmt"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

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
	buf := data.MaterializeToBuffer(serverBufferPool)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}
