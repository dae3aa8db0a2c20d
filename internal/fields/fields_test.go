package fields

import (
	"math"
	"testing"
)

// TestRoundTrip: what the Append functions write, a Reader reads back.
func TestRoundTrip(t *testing.T) {
	b := AppendUvarint(nil, math.MaxUint64)
	b = AppendUvarint(b, 7)
	b = AppendUvarint(b, math.MaxInt64)
	b = AppendBytes(b, []byte("bytes"))
	b = AppendString(b, "text")
	b = AppendBool(AppendBool(b, true), false)
	b = append(b, 9)
	r := NewReader(b)
	if r.Uvarint() != math.MaxUint64 || r.Uint32() != 7 || r.Int63() != math.MaxInt64 || string(r.Bytes()) != "bytes" ||
		r.Text() != "text" || !r.Bool() || r.Bool() || r.Byte() != 9 || r.Err() != nil || len(r.Rest()) != 0 {
		t.Fatalf("read back wrong: err %v, rest %x", r.Err(), r.Rest())
	}
}

// TestFirstErrorSticks: every malformed field is an error, later reads
// return zero, and the first error stays.
func TestFirstErrorSticks(t *testing.T) {
	for name, c := range map[string]struct {
		b    []byte
		read func(r *Reader)
	}{
		"overlong varint":    {[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, func(r *Reader) { r.Uvarint() }},
		"padded varint":      {[]byte{0x81, 0x00}, func(r *Reader) { r.Uvarint() }},
		"uint32 overflow":    {AppendUvarint(nil, 1<<32), func(r *Reader) { r.Uint32() }},
		"int63 overflow":     {AppendUvarint(nil, 1<<63), func(r *Reader) { r.Int63() }},
		"empty byte":         {nil, func(r *Reader) { r.Byte() }},
		"bool 2":             {[]byte{2}, func(r *Reader) { r.Bool() }},
		"count beyond input": {AppendUvarint(nil, 5), func(r *Reader) { r.Bytes() }},
	} {
		r := NewReader(append(c.b, 1, 1, 1))
		if len(c.b) == 0 {
			r = NewReader(nil)
		}
		c.read(&r)
		first := r.Err()
		if first == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if r.Uvarint() != 0 || r.Byte() != 0 || r.Bytes() != nil || r.Err() != first {
			t.Errorf("%s: reads after the error are not zero, or the error changed", name)
		}
	}
}
