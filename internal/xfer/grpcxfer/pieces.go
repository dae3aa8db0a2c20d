package grpcxfer

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"
)

// chunkHeadMax bounds the bytes before a chunk's data in the shape
// chunkPieces reads: two tags of one byte and two varints of at most 10.
const chunkHeadMax = 24

// chunkPieces reads the message whose bytes are views, in order, as an
// UploadRequest holding a Chunk, without gathering them: the chunk's data
// is returned as pieces of views (appended to dst). It reads the shape a
// protobuf encoder writes, our client's included: field 2 holding data
// (field 1) and then, unless it is zero, crc32c (field 2), each once; ok
// is false for anything else, which the caller gathers and parses
// (parseChunk, then protobuf). Whatever it accepts, parseChunk reads the
// same from the gathered bytes (FuzzChunkPieces).
func chunkPieces(views [][]byte, dst [][]byte) (pieces [][]byte, crc uint32, ok bool) {
	total := 0
	for _, v := range views {
		total += len(v)
	}
	var headBuf [chunkHeadMax]byte
	head := headBuf[:copyAt(views, 0, headBuf[:min(total, chunkHeadMax)])]
	num, typ, n := protowire.ConsumeTag(head)
	if n < 0 || num != 2 || typ != protowire.BytesType {
		return dst, 0, false
	}
	inner, m := protowire.ConsumeVarint(head[n:])
	if m < 0 || inner != uint64(total-n-m) {
		return dst, 0, false
	}
	n += m
	num, typ, m = protowire.ConsumeTag(head[n:])
	if m < 0 || num != 1 || typ != protowire.BytesType {
		return dst, 0, false
	}
	n += m
	size, m := protowire.ConsumeVarint(head[n:])
	if m < 0 || size > uint64(total-n-m) {
		return dst, 0, false
	}
	start := n + m
	end := start + int(size)
	switch total - end {
	case 0: // crc32c zero, so not written
	case 5:
		var tail [5]byte
		copyAt(views, end, tail[:])
		num, typ, m := protowire.ConsumeTag(tail[:])
		if m != 1 || num != 2 || typ != protowire.Fixed32Type {
			return dst, 0, false
		}
		crc = binary.LittleEndian.Uint32(tail[1:])
	default:
		return dst, 0, false
	}
	return sliceAt(views, start, end, dst), crc, true
}

// copyAt copies into dst the bytes of views from offset at on (views
// taken as one run of bytes), and returns how many it copied.
func copyAt(views [][]byte, at int, dst []byte) int {
	n := 0
	for _, v := range views {
		if at >= len(v) {
			at -= len(v)
			continue
		}
		n += copy(dst[n:], v[at:])
		at = 0
		if n == len(dst) {
			break
		}
	}
	return n
}

// sliceAt appends to dst the pieces of views that hold bytes [start, end)
// of their run, empty pieces left out.
func sliceAt(views [][]byte, start, end int, dst [][]byte) [][]byte {
	for _, v := range views {
		if start >= len(v) {
			start -= len(v)
			end -= len(v)
			continue
		}
		if end <= start {
			break
		}
		p := v[start:min(end, len(v))]
		dst = append(dst, p)
		end -= start + len(p)
		start = 0
	}
	return dst
}
