package kafkarec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/defaults"
)

// ErrMalformed is wrapped by every error about a records section that is
// not what the sink expects. Test for it with errors.Is; errors.As with a
// *MalformedError gives the details.
var ErrMalformed = errors.New("kafkarec: malformed records section")

// MalformedError says where and how a records section is malformed. It
// wraps ErrMalformed.
type MalformedError struct {
	// Offset is the byte offset in the section where the problem is: the
	// start of the bad field, or where a missing one should have been.
	Offset int
	// Record is the index of the record concerned, or -1 if the problem is
	// after the last record or in the arguments.
	Record int
	// Reason says what is wrong.
	Reason string
}

func (e *MalformedError) Error() string {
	if e.Record < 0 {
		return fmt.Sprintf("kafkarec: malformed records section at byte %d: %s", e.Offset, e.Reason)
	}
	return fmt.Sprintf("kafkarec: malformed records section at byte %d, record %d: %s", e.Offset, e.Record, e.Reason)
}

// Unwrap returns ErrMalformed.
func (e *MalformedError) Unwrap() error { return ErrMalformed }

func malformed(offset, record int, format string, args ...any) error {
	return &MalformedError{Offset: offset, Record: record, Reason: fmt.Sprintf(format, args...)}
}

// maxRecordOverhead bounds what a record of AppendRecords takes beside its
// value, its key and the agent id in its header value: the varints, the
// attributes, the header's key. Used to grow dst once.
const maxRecordOverhead = 5 + 1 + 1 + 5 + 5 + 5 + 1 + 1 + len(HeaderSluice) + 5 + (1 + binary.MaxVarintLen64 + 2*binary.MaxVarintLen32)

// AppendRecords appends to dst the records section of a Kafka v2 record
// batch holding body's records (body in internal/batch's format), and
// returns it with the number of records. Record i has key agent, value
// body's record i, offsetDelta i, timestampDelta 0 (every record takes the
// batch's timestamp) and one header, HeaderSluice, whose value is
// AppendHeaderValue of (agent, message, i, count): what the Kafka store's
// sink writes for the same message.
//
// A malformed body is an error wrapping batch.ErrMalformed; an agent id
// that is empty or longer than defaults.MaxAgentIDLen is an error too.
// On error dst is returned as it was. Once dst has room, it allocates
// nothing.
func AppendRecords(dst, body, agent []byte, message uint64) ([]byte, int, error) {
	if len(agent) == 0 || len(agent) > defaults.MaxAgentIDLen {
		return dst, 0, fmt.Errorf("kafkarec: agent id of %d bytes, want 1 to %d", len(agent), defaults.MaxAgentIDLen)
	}
	start := len(dst)
	var n, i int
	err := batch.Decode(body, func(rec []byte) error {
		if i == 0 {
			// Decode checked all of body before this first call, so the
			// count after magic and version is a well-formed uvarint.
			c, _ := binary.Uvarint(body[2:])
			n = int(c)
			dst = slices.Grow(dst, len(body)+n*(maxRecordOverhead+2*len(agent)))
		}
		dst = appendRecord(dst, rec, RecordHeaders{Agent: agent, Message: message, Index: uint32(i), Count: uint32(n)})
		i++
		return nil
	})
	if err != nil {
		return dst[:start], 0, err
	}
	return dst, n, nil
}

// appendRecord appends one record of a message's own batch: offsetDelta
// h.Index.
func appendRecord(b, value []byte, h RecordHeaders) []byte {
	return AppendRecord(b, int32(h.Index), value, h)
}

// recordBodyLen is what a record's length prefix counts: everything
// after it.
func recordBodyLen(offsetDelta int32, value []byte, h RecordHeaders) int {
	hvLen := HeaderValueLen(h)
	return 1 + 1 + varintLen(int64(offsetDelta)) +
		varintLen(int64(len(h.Agent))) + len(h.Agent) +
		varintLen(int64(len(value))) + len(value) +
		1 + varintLen(int64(len(HeaderSluice))) + len(HeaderSluice) + varintLen(int64(hvLen)) + hvLen
}

// RecordLen is the bytes AppendRecord appends for this record.
func RecordLen(offsetDelta int32, value []byte, h RecordHeaders) int {
	n := recordBodyLen(offsetDelta, value, h)
	return varintLen(int64(n)) + n
}

// AppendRecord appends one record: key h.Agent, value, offsetDelta (its
// place in its batch), timestampDelta 0 (it takes the batch's timestamp),
// and the HeaderSluice header of h. A batch of the records of several
// messages (the Kafka store's, which fills batches across messages) has
// offsetDelta and h.Index apart; AppendRecords' have them equal.
func AppendRecord(b []byte, offsetDelta int32, value []byte, h RecordHeaders) []byte {
	hvLen := HeaderValueLen(h)
	b = binary.AppendVarint(b, int64(recordBodyLen(offsetDelta, value, h)))
	b = append(b, 0, 0) // attributes (none are defined), timestampDelta 0
	b = binary.AppendVarint(b, int64(offsetDelta))
	b = binary.AppendVarint(b, int64(len(h.Agent)))
	b = append(b, h.Agent...)
	b = binary.AppendVarint(b, int64(len(value)))
	b = append(b, value...)
	b = binary.AppendVarint(b, 1) // headers
	b = binary.AppendVarint(b, int64(len(HeaderSluice)))
	b = append(b, HeaderSluice...)
	b = binary.AppendVarint(b, int64(hvLen))
	return AppendHeaderValue(b, h)
}

// Records checks that section is the records section AppendRecords builds
// for count records of agent's message, and calls fn (when not nil) with
// each record's index and value, which aliases section.
//
// It accepts nothing else: exactly count records, each with attributes 0,
// timestampDelta 0, offsetDelta its index, key agent, and exactly one
// header, HeaderSluice, whose value parses (ParseHeaderValue) to agent,
// message, its index and count; every length within the bytes, every
// varint in its shortest form, nothing after a record's fields or after
// the last record. Any violation is an error wrapping ErrMalformed (a
// *MalformedError naming the record and the byte); it never panics. An
// error of fn is returned as it is.
//
// fn is called for each record once the record is checked, before the
// next one is: on an error, fn may have seen the records before the
// faulty one (well-formed ones) and the caller refuses the section whole.
func Records(section, agent []byte, message uint64, count int, fn func(i int, value []byte) error) error {
	if count < 0 || count > math.MaxInt32 {
		return malformed(0, -1, "record count %d out of Kafka's range (0 to %d)", count, math.MaxInt32)
	}
	var scratch [maxPredicted]byte
	off := 0
	for i := range count {
		value, end, ok := matchRecord(section, off, i, agent, message, count, &scratch)
		if !ok {
			// checkRecord, field by field, says what is wrong; it
			// accepts exactly what matchRecord does.
			if _, _, err := checkRecord(section, off, i, agent, message, count); err != nil {
				return err
			}
			return malformed(off, i, "record differs from its one encoding (a bug of this package)")
		}
		if fn != nil {
			if err := fn(i, value); err != nil {
				return err
			}
		}
		off = end
	}
	if off != len(section) {
		return malformed(off, -1, "%d bytes after the last of %d records", len(section)-off, count)
	}
	return nil
}

// maxPredicted bounds each of the two runs of bytes matchRecord predicts
// in a record: before its value (attributes, timestampDelta, offsetDelta,
// key: at most 264 bytes) and after it (the header: at most this).
const maxPredicted = 1 + 1 + len(HeaderSluice) + 2 + 1 + binary.MaxVarintLen64 + 2*binary.MaxVarintLen32 + defaults.MaxAgentIDLen

// matchRecord is Records' fast path: everything of record i but its value
// is known in advance, so it compares the record with the bytes
// AppendRecords would write around the value, instead of parsing each
// field (1.7 times faster on bench ingest's records: 52 ns against 86
// per record, BenchmarkNativeHop/part=records-check). ok is false if the
// record is not exactly those bytes; checkRecord then says why.
func matchRecord(section []byte, off, i int, agent []byte, message uint64, count int, scratch *[maxPredicted]byte) (value []byte, end int, ok bool) {
	if len(agent) == 0 || len(agent) > defaults.MaxAgentIDLen {
		return nil, 0, false
	}
	l, n := binary.Varint(section[off:])
	if n <= 0 || n != varintLen(l) || l < 0 || l > int64(len(section)-off-n) {
		return nil, 0, false
	}
	end = off + n + int(l)
	rec := section[off+n : end]
	want := append(scratch[:0], 0, 0) // attributes, timestampDelta
	want = binary.AppendVarint(want, int64(i))
	want = binary.AppendVarint(want, int64(len(agent)))
	want = append(want, agent...)
	if !bytes.HasPrefix(rec, want) {
		return nil, 0, false
	}
	rec = rec[len(want):]
	vl, vn := binary.Varint(rec)
	if vn <= 0 || vn != varintLen(vl) || vl < 0 || vl > int64(len(rec)-vn) {
		return nil, 0, false
	}
	value = rec[vn : vn+int(vl) : vn+int(vl)]
	h := RecordHeaders{Agent: agent, Message: message, Index: uint32(i), Count: uint32(count)}
	want = append(scratch[:0], 2, 2*byte(len(HeaderSluice))) // one header; its key's length
	want = append(want, HeaderSluice...)
	want = binary.AppendVarint(want, int64(HeaderValueLen(h)))
	want = AppendHeaderValue(want, h)
	return value, end, bytes.Equal(rec[vn+int(vl):], want)
}

// checkRecord checks record i, starting at off in section, and returns its
// value and the offset of the next record.
func checkRecord(section []byte, off, i int, agent []byte, message uint64, count int) (value []byte, end int, err error) {
	c := cursor{b: section, off: off, rec: i}
	l, err := c.varint("record length")
	if err != nil {
		return nil, 0, err
	}
	if l < 0 || l > int64(len(section)-c.off) {
		return nil, 0, c.fail("record length %d, %d bytes left", l, len(section)-c.off)
	}
	end = c.off + int(l)
	c.b = section[:end] // nothing of the record reads past its length
	if err := c.expectByte("attributes", 0); err != nil {
		return nil, 0, err
	}
	if err := c.expectVarint("timestampDelta", 0); err != nil {
		return nil, 0, err
	}
	if err := c.expectVarint("offsetDelta", int64(i)); err != nil {
		return nil, 0, err
	}
	if err := c.expectBytes("key", "key length", agent); err != nil {
		return nil, 0, err
	}
	if value, err = c.bytes("value", "value length"); err != nil {
		return nil, 0, err
	}
	if err := c.expectVarint("header count", 1); err != nil {
		return nil, 0, err
	}
	if err := c.expectBytes("header key", "header key length", headerSluiceKey); err != nil {
		return nil, 0, err
	}
	at := c.off
	hv, err := c.bytes("header value", "header value length")
	if err != nil {
		return nil, 0, err
	}
	h, ok := ParseHeaderValue(hv)
	switch {
	case !ok:
		return nil, 0, malformed(at, i, "malformed %s header value %x", HeaderSluice, hv)
	case !bytes.Equal(h.Agent, agent) || h.Message != message || h.Index != uint32(i) || h.Count != uint32(count):
		return nil, 0, malformed(at, i, "%s header says agent %q message %d record %d of %d, want %q %d %d of %d",
			HeaderSluice, h.Agent, h.Message, h.Index, h.Count, agent, message, i, count)
	}
	if c.off != end {
		return nil, 0, c.fail("%d bytes after the record's header", end-c.off)
	}
	return value, end, nil
}

// headerSluiceKey is HeaderSluice as bytes, made once: the conversion
// at each comparison allocated.
var headerSluiceKey = []byte(HeaderSluice)

// cursor reads the fields of one record.
type cursor struct {
	b   []byte // up to the end of the record once its length is known
	off int
	rec int
}

func (c *cursor) fail(format string, args ...any) error {
	return malformed(c.off, c.rec, format, args...)
}

// varint reads a Kafka varint (zigzag) in its shortest form.
func (c *cursor) varint(what string) (int64, error) {
	if c.off < len(c.b) && c.b[c.off] < 0x80 { // the usual one-byte case
		u := c.b[c.off]
		c.off++
		return int64(u>>1) ^ -int64(u&1), nil
	}
	v, n := binary.Varint(c.b[c.off:])
	switch {
	case n == 0:
		return 0, c.fail("%s: truncated varint", what)
	case n < 0:
		return 0, c.fail("%s: varint overflows 64 bits", what)
	case n != varintLen(v):
		return 0, c.fail("%s: varint %d not in its shortest form", what, v)
	}
	c.off += n
	return v, nil
}

func (c *cursor) expectVarint(what string, want int64) error {
	at := c.off
	v, err := c.varint(what)
	if err == nil && v != want {
		err = malformed(at, c.rec, "%s %d, want %d", what, v, want)
	}
	return err
}

func (c *cursor) expectByte(what string, want byte) error {
	switch {
	case c.off >= len(c.b):
		return c.fail("record ends before its %s", what)
	case c.b[c.off] != want:
		return c.fail("%s 0x%02x, want 0x%02x", what, c.b[c.off], want)
	}
	c.off++
	return nil
}

// bytes reads a length-prefixed field (its length named lengthName, a
// constant: a concatenation here would allocate per field); a null one
// (length -1) is refused: sluice writes none.
func (c *cursor) bytes(what, lengthName string) ([]byte, error) {
	at := c.off
	l, err := c.varint(lengthName)
	if err != nil {
		return nil, err
	}
	if l < 0 || l > int64(len(c.b)-c.off) {
		return nil, malformed(at, c.rec, "%s length %d, %d bytes left in the record", what, l, len(c.b)-c.off)
	}
	v := c.b[c.off : c.off+int(l) : c.off+int(l)]
	c.off += int(l)
	return v, nil
}

func (c *cursor) expectBytes(what, lengthName string, want []byte) error {
	at := c.off
	v, err := c.bytes(what, lengthName)
	if err == nil && !bytes.Equal(v, want) {
		err = malformed(at, c.rec, "%s %q, want %q", what, v, want)
	}
	return err
}
