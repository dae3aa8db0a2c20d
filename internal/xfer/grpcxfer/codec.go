package grpcxfer

import (
	"fmt"
	"sync"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the codec this one wraps
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	xferv1 "github.com/sluicehq/sluice/api/xfer/v1"
)

// The server reads an upload's messages through codec: gRPC's protobuf
// codec, except for an UploadRequest received into a *request. gRPC's
// codec gathers a message's HTTP/2 frames into a pooled buffer it clears
// first, then protobuf copies the chunk's bytes out of it into a fresh
// slice: two copies, a clear and an allocation per chunk, about a third
// of the server's memmove in a 256 KiB-chunk upload (docs/xfer.md, "Where
// an upload's CPU goes"). A *request holding a chunk keeps the frames
// gRPC read it into and points at the chunk's bytes in them, in pieces,
// which a store that takes pieces (xfer.PieceWriter) copies once into
// its blocks; any other message is gathered into a buffer of its own and
// parsed there.
type codec struct{ encoding.CodecV2 }

func newCodec() codec { return codec{encoding.GetCodecV2("proto")} }

// Marshal marshals a message as gRPC's codec does, but a large one into a
// buffer of sharedPool, which is not cleared first (gRPC's codec takes
// its buffer from the default pool, which clears it, whatever pool the
// connection has).
func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return c.CodecV2.Marshal(v)
	}
	size := proto.Size(m)
	if mem.IsBelowBufferPoolingThreshold(size) {
		return c.CodecV2.Marshal(v)
	}
	buf := sharedPool.Get(size)
	b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend((*buf)[:0], m)
	if err != nil {
		sharedPool.Put(buf)
		return nil, err
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, sharedPool)}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*request)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	r.release()
	if r.holdChunk(data) {
		return nil
	}
	r.bufp = getBuf(data.Len())
	r.buf = *r.bufp
	data.CopyTo(r.buf)
	return r.parse()
}

// request is one UploadRequest as the server receives it: a chunk whose
// bytes are pieces of the message's frames (frames held) or of buf, or
// any other message decoded by protobuf (msg). Give it back with release
// once the chunk is written.
type request struct {
	bufp    *[]byte // from bufs; buf is *bufp
	buf     []byte
	frames  mem.BufferSlice // gRPC's buffers of the message, referenced while pieces point into them
	views   [][]byte        // the frames' bytes, reused between messages
	isChunk bool
	pieces  [][]byte // the chunk's bytes, in frames or buf
	crc     uint32
	msg     xferv1.UploadRequest // when !isChunk
}

// holdChunk takes data as r's chunk without copying it, when it is one
// in the shape chunkPieces reads: it then keeps a reference to data's
// buffers, which gRPC frees (to its pool) when release drops it.
func (r *request) holdChunk(data mem.BufferSlice) bool {
	r.views = r.views[:0]
	for _, b := range data {
		r.views = append(r.views, b.ReadOnlyData())
	}
	pieces, crc, ok := chunkPieces(r.views, r.pieces[:0])
	if !ok {
		return false
	}
	data.Ref()
	r.frames = append(r.frames[:0], data...)
	r.isChunk, r.pieces, r.crc = true, pieces, crc
	return true
}

// parse reads r.buf. The in-place path takes only the exact shape our
// clients (and any protobuf encoder) send for a chunk: field 2 once,
// holding data (field 1) and crc32c (field 2) at most once each. Anything
// else, however odd (fields repeated, merged, unknown), goes to protobuf,
// whose reading is the reference (FuzzRequestParse compares the two).
func (r *request) parse() error {
	if data, crc, ok := parseChunk(r.buf); ok {
		r.isChunk, r.pieces, r.crc = true, append(r.pieces[:0], data), crc
		return nil
	}
	r.isChunk, r.pieces, r.crc = false, r.pieces[:0], 0
	r.msg.Reset()
	if err := proto.Unmarshal(r.buf, &r.msg); err != nil {
		return fmt.Errorf("bad UploadRequest: %w", err)
	}
	return nil
}

// chunkLen is the length of r's chunk.
func (r *request) chunkLen() int {
	n := 0
	for _, p := range r.pieces {
		n += len(p)
	}
	return n
}

// gathered returns r's chunk in one slice, for a store that does not
// take pieces: the pieces copied into a buffer of bufs when there are
// several.
func (r *request) gathered() []byte {
	if len(r.pieces) == 1 {
		return r.pieces[0]
	}
	p := getBuf(r.chunkLen())
	b := (*p)[:0]
	for _, q := range r.pieces {
		b = append(b, q...)
	}
	r.releaseBuf()
	r.bufp, r.buf = p, b
	return b
}

// parseChunk parses b as an UploadRequest holding a Chunk and nothing
// else, written once; ok is false for any other message.
func parseChunk(b []byte) (data []byte, crc uint32, ok bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != 2 || typ != protowire.BytesType {
		return nil, 0, false
	}
	inner, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		return nil, 0, false
	}
	var seenData, seenCRC bool
	for len(inner) > 0 {
		num, typ, n := protowire.ConsumeTag(inner)
		if n < 0 {
			return nil, 0, false
		}
		inner = inner[n:]
		switch {
		case num == 1 && typ == protowire.BytesType && !seenData:
			v, m := protowire.ConsumeBytes(inner)
			if m < 0 {
				return nil, 0, false
			}
			data, seenData, inner = v, true, inner[m:]
		case num == 2 && typ == protowire.Fixed32Type && !seenCRC:
			v, m := protowire.ConsumeFixed32(inner)
			if m < 0 {
				return nil, 0, false
			}
			crc, seenCRC, inner = v, true, inner[m:]
		default:
			return nil, 0, false
		}
	}
	return data, crc, true
}

// release gives r's buffers back; r.pieces is invalid from then on.
func (r *request) release() {
	r.releaseBuf()
	if len(r.frames) > 0 {
		r.frames.Free()
		clear(r.frames)
		r.frames = r.frames[:0]
	}
	clear(r.views)
	clear(r.pieces)
	r.pieces = r.pieces[:0]
}

func (r *request) releaseBuf() {
	if r.bufp != nil {
		bufs.Put(r.bufp)
		r.bufp, r.buf = nil, nil
	}
}

// bufs recycles the buffers of received messages between chunks and
// between streams, so that a message costs no allocation and a buffer is
// held only while its chunk is written: an idle stream holds none.
var bufs sync.Pool

// getBuf returns a buffer of n bytes from bufs, or a new one when the
// pool's is too small.
func getBuf(n int) *[]byte {
	p, ok := bufs.Get().(*[]byte)
	if !ok || cap(*p) < n {
		b := make([]byte, n)
		return &b
	}
	*p = (*p)[:n]
	return p
}
