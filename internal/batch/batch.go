package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
)

const (
	// Magic is the first byte of every body.
	Magic = 0xB1
	// Version is the format version, the second byte of every body.
	Version = 1
	// MaxRecords is the most records one body may hold.
	MaxRecords = 1 << 24
)

const (
	// maxCountLen is the length of the longest count uvarint, that of
	// MaxRecords (25 bits, 7 a byte).
	maxCountLen = 4
	// headroom is the space a Builder keeps in front of the records for the
	// longest header: magic, version and count.
	headroom = 2 + maxCountLen
)

// ErrMalformed is wrapped by every error about a body that does not follow
// the format. Test for it with errors.Is; errors.As with a *MalformedError
// gives the details.
var ErrMalformed = errors.New("batch: malformed body")

// ErrTooManyRecords is returned by Builder.Add when the batch already holds
// MaxRecords records.
var ErrTooManyRecords = fmt.Errorf("batch: more than %d records", MaxRecords)

// MalformedError says where and how a body is malformed. It wraps
// ErrMalformed.
type MalformedError struct {
	// Offset is the byte offset in the body where the problem is: the start
	// of the bad field, or where a missing one should have been.
	Offset int
	// Record is the index of the record concerned, or -1 if the problem is
	// in the header or after the last record.
	Record int
	// Reason says what is wrong.
	Reason string
}

func (e *MalformedError) Error() string {
	if e.Record < 0 {
		return fmt.Sprintf("batch: malformed body at byte %d: %s", e.Offset, e.Reason)
	}
	return fmt.Sprintf("batch: malformed body at byte %d, record %d: %s", e.Offset, e.Record, e.Reason)
}

// Unwrap returns ErrMalformed.
func (e *MalformedError) Unwrap() error { return ErrMalformed }

func malformed(offset, record int, format string, args ...any) error {
	return &MalformedError{Offset: offset, Record: record, Reason: fmt.Sprintf(format, args...)}
}

// Builder builds a body one record at a time. The zero value is an empty
// batch, ready to use. A Builder reuses its buffer across Reset, so once the
// buffer has reached the working size, Add and Bytes do not allocate.
//
// A Builder is not safe for concurrent use.
type Builder struct {
	// buf is extra bytes for a caller's header (ResetInto, Framed), then
	// headroom bytes for the batch header, then the records as encoded.
	// It is nil until first used.
	buf []byte
	// extra is the room ResetInto keeps in front of the batch header.
	extra int
	// count is the number of records added, at most MaxRecords.
	count int
}

// front is where the records start in buf.
func (b *Builder) front() int { return b.extra + headroom }

func (b *Builder) init() {
	if b.buf == nil {
		b.buf = make([]byte, b.front(), max(512, b.front()))
	}
}

// Reset empties the batch, keeping the buffer for reuse. It invalidates the
// slice returned by Bytes.
func (b *Builder) Reset() {
	b.init()
	b.buf = b.buf[:b.front()]
	b.count = 0
}

// ResetInto empties the batch and makes it build in buf's memory (its
// capacity; what it holds is ignored), keeping extra bytes free in front
// of the body for a header of the caller's (see Framed). The Builder no
// longer uses the buffer it had.
func (b *Builder) ResetInto(buf []byte, extra int) {
	b.extra = extra
	if cap(buf) < b.front() {
		buf = make([]byte, 0, max(512, b.front()))
	}
	b.buf = buf[:b.front()]
	b.count = 0
}

// Cap is the capacity of the Builder's buffer (0: it has none yet, or
// Framed gave it away).
func (b *Builder) Cap() int { return cap(b.buf) }

// Framed writes the header and returns the body with n bytes in front of
// it, all in the Builder's buffer, for the caller to write its own header
// into the first n bytes without copying the body. The Builder gives the
// buffer up (framed keeps the rest of its capacity, for reuse): it is empty and without a buffer afterwards (ResetInto gives
// it a new one). ok is false, and nothing changes, when n is more than
// the extra room ResetInto kept.
func (b *Builder) Framed(n int) (framed []byte, ok bool) {
	if n < 0 || n > b.extra {
		return nil, false
	}
	start := len(b.buf) - len(b.Bytes()) // where the header Bytes wrote begins
	framed = b.buf[start-n:]             // all of the capacity: the buffer is the caller's now
	b.buf, b.count = nil, 0
	return framed, true
}

// Grow makes room for n more bytes of encoded records (each record takes its
// length plus 1 to 10 bytes), so that Adds up to that size do not allocate.
func (b *Builder) Grow(n int) {
	b.init()
	if n > cap(b.buf)-len(b.buf) {
		nb := make([]byte, len(b.buf), len(b.buf)+n)
		copy(nb, b.buf)
		b.buf = nb
	}
}

// Add appends a copy of rec to the batch. It fails, adding nothing, only
// with ErrTooManyRecords, when the batch already holds MaxRecords records.
// It invalidates the slice returned by Bytes.
func (b *Builder) Add(rec []byte) error {
	if b.count >= MaxRecords {
		return ErrTooManyRecords
	}
	b.init()
	b.buf = binary.AppendUvarint(b.buf, uint64(len(rec)))
	b.buf = append(b.buf, rec...)
	b.count++
	return nil
}

// Count returns the number of records added.
func (b *Builder) Count() int { return b.count }

// Len returns the size of the body Bytes would return now, header included.
func (b *Builder) Len() int {
	return 2 + uvarintLen(uint64(b.count)) + b.recordsLen()
}

// LenWith returns what Len would return after adding one more record of n
// bytes, so a caller can tell whether the record still fits under a size
// limit before adding it.
func (b *Builder) LenWith(n int) int {
	return 2 + uvarintLen(uint64(b.count)+1) + b.recordsLen() + uvarintLen(uint64(n)) + n
}

// Size returns the size of the body that packs records, without building
// it.
func Size(records [][]byte) int {
	n := 2 + uvarintLen(uint64(len(records)))
	for _, r := range records {
		n += uvarintLen(uint64(len(r))) + len(r)
	}
	return n
}

func (b *Builder) recordsLen() int {
	if b.buf == nil {
		return 0
	}
	return len(b.buf) - b.front()
}

// Bytes writes the header and returns the body: Len bytes, valid until the
// next Add, Reset or Grow, and aliasing the Builder's buffer, which the next
// batch overwrites. Copy it, or be done with it (sent, compressed), before
// reusing the Builder. Its capacity is its length, so appending to it
// copies rather than overwriting the buffer.
func (b *Builder) Bytes() []byte {
	b.init()
	start := b.front() - 2 - uvarintLen(uint64(b.count))
	b.buf[start] = Magic
	b.buf[start+1] = Version
	binary.PutUvarint(b.buf[start+2:], uint64(b.count))
	return b.buf[start:len(b.buf):len(b.buf)]
}

// Decode checks body and, only if it is well formed, calls fn with each
// record in order. rec aliases body (no copy is made; its capacity is its
// length): fn must copy it to keep it after body is reused. If fn returns an
// error, Decode stops and returns that error as is. A nil fn only checks the
// body.
//
// A malformed body is reported, before fn is called at all, by an error
// that wraps ErrMalformed and is a *MalformedError. Decode never panics on
// any input.
func Decode(body []byte, fn func(rec []byte) error) error {
	count, off, err := scan(body)
	if err != nil || fn == nil {
		return err
	}
	// scan checked every bound; this pass only slices.
	for range count {
		var l uint64
		if c := body[off]; c < 0x80 {
			l = uint64(c)
			off++
		} else {
			var n int
			l, n = binary.Uvarint(body[off:])
			off += n
		}
		end := off + int(l)
		if err := fn(body[off:end:end]); err != nil {
			return err
		}
		off = end
	}
	return nil
}

// Count checks body as Decode does and returns the number of records in it.
func Count(body []byte) (int, error) {
	count, _, err := scan(body)
	if err != nil {
		return 0, err
	}
	return count, nil
}

// scan checks all of body and returns its record count and the offset of its
// first record.
func scan(body []byte) (count, first int, err error) {
	switch {
	case len(body) == 0:
		return 0, 0, malformed(0, -1, "empty body, want magic 0x%02X", Magic)
	case body[0] != Magic:
		return 0, 0, malformed(0, -1, "bad magic 0x%02X, want 0x%02X", body[0], Magic)
	case len(body) == 1:
		return 0, 0, malformed(1, -1, "body ends before the version byte")
	case body[1] != Version:
		return 0, 0, malformed(1, -1, "unsupported format version %d, want %d", body[1], Version)
	}
	c, n, bad := uvarint(body[2:])
	if bad != "" {
		return 0, 0, malformed(2, -1, "record count: %s", bad)
	}
	off := 2 + n
	left := uint64(len(body) - off)
	if c > MaxRecords {
		return 0, 0, malformed(2, -1, "record count %d exceeds MaxRecords (%d)", c, MaxRecords)
	}
	if c > left {
		// Each record takes at least its 1-byte length.
		return 0, 0, malformed(2, -1, "record count %d cannot fit in the %d bytes left", c, left)
	}
	count, first = int(c), off
	for i := range count {
		if off == len(body) {
			return 0, 0, malformed(off, i, "body ends after %d of the %d records the count announces", i, count)
		}
		l, n, bad := uvarint(body[off:])
		if bad != "" {
			return 0, 0, malformed(off, i, "record length: %s", bad)
		}
		off += n
		if left := uint64(len(body) - off); l > left {
			return 0, 0, malformed(off-n, i, "record length %d exceeds the %d bytes left", l, left)
		}
		off += int(l)
	}
	if off != len(body) {
		return 0, 0, malformed(off, -1, "%d trailing bytes after the %d records the count announces", len(body)-off, count)
	}
	return count, first, nil
}

// uvarint decodes a shortest-form uvarint from the start of b. bad says what
// is wrong, if anything.
func uvarint(b []byte) (v uint64, n int, bad string) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1, ""
	}
	v, n = binary.Uvarint(b)
	switch {
	case n == 0:
		return 0, 0, "truncated uvarint"
	case n < 0:
		return 0, 0, "uvarint overflows 64 bits"
	case b[n-1] == 0:
		return 0, 0, "uvarint not in shortest form"
	}
	return v, n, ""
}

// uvarintLen returns the length of v as a uvarint.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
