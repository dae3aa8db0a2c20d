package kafkarec

import (
	"encoding/binary"

	"github.com/sluicehq/sluice/internal/defaults"
)

// HeaderSluice is the key of the one header of every Kafka record sluice
// writes: the dedup key of the record and the size of its message, packed
// into one value (see AppendHeaderValue). One header instead of four: the
// four cost about 10 % of bench ingest (b)'s CPU, in franz-go's record
// encoding and in zstd over the extra bytes (docs/benchmarks.md, issue 27's
// fourth pass).
const HeaderSluice = "sluice"

// RecordHeaders are the sluice headers of one Kafka record.
type RecordHeaders struct {
	Agent        []byte
	Message      uint64
	Index, Count uint32
}

// headerValueVersion is the first byte of a HeaderSluice value.
const headerValueVersion = 1

// HeaderValueMaxLen bounds the length of a HeaderSluice value with this
// agent id, for a caller sizing one buffer for many values.
func HeaderValueMaxLen(agent []byte) int {
	return 1 + binary.MaxVarintLen64 + 2*binary.MaxVarintLen32 + len(agent)
}

// HeaderValueLen is the exact length AppendHeaderValue appends for h.
func HeaderValueLen(h RecordHeaders) int {
	return 1 + uvarintLen(h.Message) + uvarintLen(uint64(h.Index)) + uvarintLen(uint64(h.Count)) + len(h.Agent)
}

// AppendHeaderValue appends h as the value of a HeaderSluice header:
//
//	version(1) message id (uvarint) index (uvarint) count (uvarint) agent id (the rest)
//
// Binary, for size: a consumer of other software reads it with any
// varint decoder, and `sluice consume` prints it decoded.
func AppendHeaderValue(b []byte, h RecordHeaders) []byte {
	b = append(b, headerValueVersion)
	b = binary.AppendUvarint(b, h.Message)
	b = binary.AppendUvarint(b, uint64(h.Index))
	b = binary.AppendUvarint(b, uint64(h.Count))
	return append(b, h.Agent...)
}

// ParseHeaderValue decodes a HeaderSluice value; ok is false for a
// malformed one: an unknown version, a varint that is not the shortest
// form or overflows, an empty or too long agent, an index not below
// the count. The agent aliases b.
func ParseHeaderValue(b []byte) (h RecordHeaders, ok bool) {
	if len(b) == 0 || b[0] != headerValueVersion {
		return h, false
	}
	b = b[1:]
	var vs [3]uint64
	for i, limit := range [3]uint64{1<<64 - 1, 1<<32 - 1, 1<<32 - 1} {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > limit || n != uvarintLen(v) {
			return h, false
		}
		vs[i], b = v, b[n:]
	}
	if len(b) == 0 || len(b) > defaults.MaxAgentIDLen {
		return h, false
	}
	h = RecordHeaders{Agent: b, Message: vs[0], Index: uint32(vs[1]), Count: uint32(vs[2])}
	return h, h.Index < h.Count
}

// uvarintLen is the length of v's shortest uvarint encoding.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// varintLen is the length of v's shortest zigzag varint encoding (Kafka's
// varint, encoding/binary's Varint).
func varintLen(v int64) int {
	return uvarintLen(uint64(v<<1) ^ uint64(v>>63))
}
