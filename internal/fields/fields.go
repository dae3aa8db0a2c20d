// Package fields writes and reads the fields of sluice's own small binary
// formats (the delivery protocol over RSocket, the RSocket resume
// journal): unsigned integers as uvarints, byte strings with a uvarint
// length, booleans as one byte that must be 0 or 1; a value has one
// encoding (varints in their shortest form). The Append functions
// write; a Reader reads, and its first error sticks (every later read
// returns zero), so that a decoder reads a whole record and checks Err
// once. Reads never copy: byte strings alias the input.
package fields

import (
	"encoding/binary"
	"errors"
	"math"
)

// AppendUvarint appends v.
func AppendUvarint(dst []byte, v uint64) []byte { return binary.AppendUvarint(dst, v) }

// AppendBytes appends b with its length.
func AppendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// AppendString appends s with its length.
func AppendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendBool appends v as 1 or 0.
func AppendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// Reader reads fields from a byte slice.
type Reader struct {
	b   []byte
	err error
}

// NewReader reads b.
func NewReader(b []byte) Reader { return Reader{b: b} }

// Err is the first error, or nil.
func (r *Reader) Err() error { return r.err }

// Rest is what was not read yet.
func (r *Reader) Rest() []byte { return r.b }

// Fail records msg as the error unless there is one already.
func (r *Reader) Fail(msg string) {
	if r.err == nil {
		r.err = errors.New(msg)
		r.b = nil
	}
}

// Uvarint reads an unsigned integer.
func (r *Reader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.Fail("truncated or overlong varint")
		return 0
	}
	if n > 1 && r.b[n-1] == 0 {
		// A trailing zero group: not the shortest form, which is the
		// only one Append writes (a value has one encoding).
		r.Fail("varint not in its shortest form")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Uint32 reads an unsigned integer that must fit 32 bits.
func (r *Reader) Uint32() uint32 { return uint32(r.atMost(math.MaxUint32, "value beyond 32 bits")) }

// Int63 reads an unsigned integer that must fit an int64.
func (r *Reader) Int63() int64 { return int64(r.atMost(math.MaxInt64, "value beyond 63 bits")) }

// atMost reads an unsigned integer no larger than limit.
func (r *Reader) atMost(limit uint64, msg string) uint64 {
	v := r.Uvarint()
	if v > limit {
		r.Fail(msg)
		return 0
	}
	return v
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.Fail("truncated")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// Bool reads a byte that must be 0 or 1.
func (r *Reader) Bool() bool {
	switch r.Byte() {
	case 0:
		return false
	case 1:
		return true
	}
	r.Fail("a boolean that is neither 0 nor 1")
	return false
}

// Count reads a list length, refusing one larger than the bytes left
// (every element takes at least one byte), so that a damaged length
// never makes the caller allocate more than the input's size.
func (r *Reader) Count() int {
	v := r.Uvarint()
	if v > uint64(len(r.b)) {
		r.Fail("a count larger than the bytes left")
		return 0
	}
	return int(v)
}

// Bytes reads a byte string (aliasing the input, capacity capped).
func (r *Reader) Bytes() []byte {
	n := r.Count()
	if r.err != nil {
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// Text reads a byte string as a string.
func (r *Reader) Text() string { return string(r.Bytes()) }
