package grpcxfer

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	xferv1 "github.com/sluicehq/sluice/api/xfer/v1"
)

func marshal(tb testing.TB, m *xferv1.UploadRequest) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func chunkMsg(data []byte, crc uint32) *xferv1.UploadRequest {
	return &xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Chunk{Chunk: &xferv1.Chunk{Data: data, Crc32C: crc}}}
}

// FuzzRequestParse: whatever the in-place chunk parser accepts, protobuf
// reads as the same chunk; and the codec's request agrees with protobuf
// on every input protobuf accepts.
func FuzzRequestParse(f *testing.F) {
	f.Add(marshal(f, chunkMsg([]byte("hello"), 7)))
	f.Add(marshal(f, chunkMsg(nil, 0)))
	f.Add(marshal(f, &xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Begin{Begin: &xferv1.Begin{Name: "x", Size: 3}}}))
	f.Add(marshal(f, &xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Finish{Finish: &xferv1.Finish{Sha256: []byte{1, 2}}}}))
	f.Add(append(marshal(f, chunkMsg([]byte("a"), 1)), marshal(f, chunkMsg([]byte("b"), 2))...))
	f.Fuzz(func(t *testing.T, b []byte) {
		var want xferv1.UploadRequest
		werr := proto.Unmarshal(b, &want)
		if data, crc, ok := parseChunk(b); ok {
			if werr != nil {
				t.Fatalf("parsed as a chunk, protobuf refuses it: %v", werr)
			}
			c := want.GetChunk()
			if c == nil || !bytes.Equal(c.GetData(), data) || c.GetCrc32C() != crc {
				t.Fatalf("parsed chunk (%d bytes, crc %d), protobuf reads %v", len(data), crc, &want)
			}
		}
		var r request
		err := newCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &r)
		if (err == nil) != (werr == nil) {
			t.Fatalf("codec error %v, protobuf error %v", err, werr)
		}
		if err != nil {
			return
		}
		got := &r.msg
		if r.isChunk {
			got = chunkMsg(r.data, r.crc)
		}
		if !proto.Equal(got, &want) {
			t.Fatalf("codec reads %v, protobuf %v", got, &want)
		}
		r.release()
	})
}

// A chunk split over several of gRPC's frame buffers is read whole.
func TestCodecReadsChunkAcrossBuffers(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 5000)
	b := marshal(t, chunkMsg(data, 42))
	var bs mem.BufferSlice
	for len(b) > 0 {
		n := min(len(b), 16<<10)
		bs = append(bs, mem.SliceBuffer(b[:n]))
		b = b[n:]
	}
	var r request
	if err := newCodec().Unmarshal(bs, &r); err != nil {
		t.Fatal(err)
	}
	if !r.isChunk || !bytes.Equal(r.data, data) || r.crc != 42 {
		t.Fatalf("read isChunk=%v, %d bytes, crc %d", r.isChunk, len(r.data), r.crc)
	}
	r.release()
}

// The codec marshals a chunk exactly as protobuf does, from a pooled
// buffer that held other bytes before.
func TestCodecMarshalsAsProtobuf(t *testing.T) {
	for _, n := range []int{0, 100, 64 << 10, 1 << 20} {
		junk := sharedPool.Get(n + 64)
		for i := range *junk {
			(*junk)[i] = 0xee
		}
		sharedPool.Put(junk)
		m := chunkMsg(bytes.Repeat([]byte{7}, n), uint32(n))
		got, err := newCodec().Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if want := marshal(t, m); !bytes.Equal(got.Materialize(), want) {
			t.Fatalf("%d-byte chunk marshalled differently from protobuf", n)
		}
		got.Free()
	}
}

func TestDirtyPoolTiers(t *testing.T) {
	p := &dirtyPool{}
	for _, n := range []int{0, 1, 256, 257, 16 << 10, 1<<20 + 5, 1 << 24} {
		b := p.Get(n)
		if len(*b) != n || cap(*b) < n {
			t.Fatalf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		p.Put(b)
	}
	if b := p.Get(1<<24 + 1); len(*b) != 1<<24+1 {
		t.Fatalf("beyond the tiers: len %d", len(*b))
	}
}
