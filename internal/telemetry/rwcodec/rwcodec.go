// Package rwcodec is a lossless columnar encoding of a Prometheus
// remote-write 1.0 WriteRequest that zstd compresses far better than the
// protobuf: the agent stores remote-write requests in it, the sink's
// exporter and `sluice consume` turn them back into the protobuf.
//
// Why columns: in protobuf every sample repeats its series' labels, and
// its value and timestamp sit between label strings, so zstd sees a
// mixture. Here each request's strings are stored once (a string table),
// series are lists of string indices, timestamps are deltas against the
// previous sample of the request (one scrape's samples share a
// timestamp, so most deltas are 0), label values are coded against the
// same name's previous value (a metric's series share job, instance and
// the name itself), and values are decimal integers
// where they are exact (counters, most gauges, durations in
// nanoseconds) — each kind of thing in a column of its own, so that
// zstd finds like next to like, and the same series in the next request
// as a long match.
//
// An encoded request is self-contained (no state across requests), and
// Decode returns exactly the bytes Encode was given: Encode decodes what
// it produced and compares, and declines (the caller stores the
// protobuf) on any difference, or when the request holds anything the
// columns do not carry — metadata, exemplars, native histograms, fields
// of later versions, or a protobuf laid out otherwise than Prometheus'
// marshaller does.
//
// Layout: two uvarints (series, strings), then nine columns, each a
// uvarint byte length and its bytes:
//
//	strings         each string followed by a 0 byte (a request with a
//	                0 byte in a label is not encoded)
//	label counts    uvarint per series: its labels
//	label names     uvarint per label: the name's index
//	label values    uvarint per label: 0 the same value as this name had
//	                in its previous label, 1 the next new string of the
//	                table, else 2 + zigzag(index - that previous value's
//	                index, 0 for a name's first label): a histogram's
//	                le values, seen before, each come as +1
//	sample counts   uvarint per series: its samples
//	timestamps      zigzag varint per sample: minus the previous sample's (the first: minus 0)
//	value tags      byte per sample: 0 a raw float, 1+k a decimal with k digits after the point
//	decimals        zigzag varint per tag ≥ 1: the value times 10^k
//	floats          8 bytes little-endian per tag 0: the float's bits
package rwcodec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// MaxDecoded bounds what Decode produces: the agent refuses bodies over
// 64 MiB, so no honest record decodes to more, and a forged one (a long
// string referenced many times) must not exhaust the sink's memory.
const MaxDecoded = 64 << 20

// ErrMalformed wraps every Decode error.
var ErrMalformed = errors.New("rwcodec: malformed encoded remote-write request")

// maxScale is the most digits after the decimal point a value is tried
// with: 9 covers durations in seconds taken from nanoseconds.
const maxScale = 9

var pow10 = [maxScale + 1]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// Column indices, in stored order.
const (
	colStrBytes = iota
	colLabelCounts
	colLabelNames
	colLabelValues
	colSampleCounts
	colTimestamps
	colTags
	colDecimals
	colFloats
	numColumns
)

// Encode returns the encoding of the WriteRequest body, and false when
// it would not reproduce body exactly or would not be smaller: the
// caller then stores body as it is.
func Encode(body []byte) ([]byte, bool) {
	var e encoder
	if !e.parseRequest(body) || e.hasZero {
		return nil, false
	}
	enc := e.finish()
	if len(enc) >= len(body) {
		return nil, false
	}
	dec, err := Decode(enc)
	if err != nil || !bytes.Equal(dec, body) {
		return nil, false
	}
	return enc, true
}

// encoder collects the columns of one request.
type encoder struct {
	cols     [numColumns][]byte
	index    map[string]uint64
	nSeries  uint64
	lastTime int64
	// lastValue[name's index] is 1 + that name's latest value's index
	// (0: the name has had no label yet).
	lastValue []uint64
	// hasZero: a string holds a 0 byte, which ends strings here.
	hasZero bool
}

// parseRequest fills the columns from body; false for anything the
// columns do not carry.
func (e *encoder) parseRequest(body []byte) bool {
	e.index = make(map[string]uint64)
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			return false // metadata, a later version's field, damage
		}
		ts, m := protowire.ConsumeBytes(body[n:])
		if m < 0 || !e.parseSeries(ts) {
			return false
		}
		body = body[n+m:]
	}
	return true
}

func (e *encoder) parseSeries(ts []byte) bool {
	var labels, samples uint64
	for len(ts) > 0 {
		num, typ, n := protowire.ConsumeTag(ts)
		if n < 0 || typ != protowire.BytesType || (num != 1 && num != 2) {
			return false // exemplars, histograms, unknown fields
		}
		v, m := protowire.ConsumeBytes(ts[n:])
		if m < 0 {
			return false
		}
		var ok bool
		if num == 1 {
			labels++
			ok = e.parseLabel(v)
		} else {
			samples++
			ok = e.parseSample(v)
		}
		if !ok {
			return false
		}
		ts = ts[n+m:]
	}
	e.nSeries++
	e.cols[colLabelCounts] = protowire.AppendVarint(e.cols[colLabelCounts], labels)
	e.cols[colSampleCounts] = protowire.AppendVarint(e.cols[colSampleCounts], samples)
	return true
}

// parseLabel adds a Label's name and value (absent: "") as string refs.
func (e *encoder) parseLabel(b []byte) bool {
	var name, value []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType || (num != 1 && num != 2) {
			return false
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return false
		}
		if num == 1 {
			name = v
		} else {
			value = v
		}
		b = b[n+m:]
	}
	ni := e.ref(name)
	e.cols[colLabelNames] = protowire.AppendVarint(e.cols[colLabelNames], ni)
	next := uint64(len(e.index))
	vi := e.ref(value)
	for uint64(len(e.lastValue)) <= ni {
		e.lastValue = append(e.lastValue, 0)
	}
	last, seen := e.lastValue[ni]-1, e.lastValue[ni] != 0
	var code uint64
	switch {
	case seen && vi == last:
		code = 0
	case vi == next:
		code = 1
	default:
		code = 2 + protowire.EncodeZigZag(int64(vi-last))
	}
	e.lastValue[ni] = vi + 1
	e.cols[colLabelValues] = protowire.AppendVarint(e.cols[colLabelValues], code)
	return true
}

// ref is s's index in the string table, adding it on first sight.
func (e *encoder) ref(s []byte) uint64 {
	if i, ok := e.index[string(s)]; ok {
		return i
	}
	i := uint64(len(e.index))
	e.index[string(s)] = i
	e.cols[colStrBytes] = append(append(e.cols[colStrBytes], s...), 0)
	e.hasZero = e.hasZero || bytes.IndexByte(s, 0) >= 0
	return i
}

// parseSample adds a Sample (absent fields: 0, as proto3 reads them).
func (e *encoder) parseSample(b []byte) bool {
	var bits uint64
	var ts int64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		switch {
		case n < 0:
			return false
		case num == 1 && typ == protowire.Fixed64Type:
			v, m := protowire.ConsumeFixed64(b[n:])
			if m < 0 {
				return false
			}
			bits, n = v, n+m
		case num == 2 && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b[n:])
			if m < 0 {
				return false
			}
			ts, n = int64(v), n+m
		default:
			return false
		}
		b = b[n:]
	}
	e.cols[colTimestamps] = protowire.AppendVarint(e.cols[colTimestamps], protowire.EncodeZigZag(ts-e.lastTime))
	e.lastTime = ts
	e.appendValue(bits)
	return true
}

// appendValue stores a value as a decimal when one with at most maxScale
// digits after the point gives back the same bits, else as its bits.
func (e *encoder) appendValue(bits uint64) {
	v := math.Float64frombits(bits)
	for k := 0; k <= maxScale && !math.IsNaN(v); k++ {
		m := math.Round(v * pow10[k])
		if math.Abs(m) >= 1<<53 {
			break // not exact as an integer: neither with more digits
		}
		// As Decode computes it: -0 comes back +0, so stays a float.
		if math.Float64bits(float64(int64(m))/pow10[k]) == bits {
			e.cols[colTags] = append(e.cols[colTags], byte(1+k))
			e.cols[colDecimals] = protowire.AppendVarint(e.cols[colDecimals], protowire.EncodeZigZag(int64(m)))
			return
		}
	}
	e.cols[colTags] = append(e.cols[colTags], 0)
	e.cols[colFloats] = binary.LittleEndian.AppendUint64(e.cols[colFloats], bits)
}

func (e *encoder) finish() []byte {
	size := 2 * binary.MaxVarintLen64
	for _, c := range e.cols {
		size += binary.MaxVarintLen64 + len(c)
	}
	out := make([]byte, 0, size)
	out = protowire.AppendVarint(out, e.nSeries)
	out = protowire.AppendVarint(out, uint64(len(e.index)))
	for _, c := range e.cols {
		out = protowire.AppendBytes(out, c)
	}
	return out
}

// Decode returns the WriteRequest (protobuf) that enc encodes, or an
// error wrapping ErrMalformed.
func Decode(enc []byte) ([]byte, error) {
	var d decoder
	if err := d.open(enc); err != nil {
		return nil, err
	}
	// Prometheus' requests come out ~4× their encoding: one allocation.
	return d.request(make([]byte, 0, min(4*len(enc), MaxDecoded)))
}

// column is one column being read.
type column struct {
	b   []byte
	err error
}

func (c *column) uvarint() uint64 {
	v, n := protowire.ConsumeVarint(c.b)
	if n < 0 {
		c.fail("a varint is cut short")
		return 0
	}
	c.b = c.b[n:]
	return v
}

func (c *column) bytes(n uint64) []byte {
	if n > uint64(len(c.b)) {
		c.fail("a column is shorter than its counts")
		return nil
	}
	v := c.b[:n]
	c.b = c.b[n:]
	return v
}

func (c *column) fail(why string) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s", ErrMalformed, why)
	}
	c.b = nil
}

// decoder reads the columns of one encoded request.
type decoder struct {
	nSeries uint64
	strs    [][]byte
	cols    [numColumns]column
	// used counts the strings labels have referred to so far;
	// lastValue[name's index] is 1 + that name's latest value's index
	// (0: none yet).
	used      uint64
	lastValue []uint64
}

func (d *decoder) open(enc []byte) error {
	head := column{b: enc}
	d.nSeries = head.uvarint()
	nStrings := head.uvarint()
	for i := range d.cols {
		d.cols[i].b = head.bytes(head.uvarint())
	}
	if head.err != nil {
		return head.err
	}
	if len(head.b) != 0 {
		return fmt.Errorf("%w: bytes after the last column", ErrMalformed)
	}
	// Every string has a 0 byte, every series a count byte: a
	// count larger than its column is damage, found before allocating.
	if nStrings > uint64(len(d.cols[colStrBytes].b)) || d.nSeries > uint64(len(d.cols[colLabelCounts].b)) {
		return fmt.Errorf("%w: counts larger than their columns", ErrMalformed)
	}
	d.strs = make([][]byte, nStrings)
	d.lastValue = make([]uint64, nStrings)
	for i := range d.strs {
		n := bytes.IndexByte(d.cols[colStrBytes].b, 0)
		if n < 0 {
			return fmt.Errorf("%w: fewer strings than counted", ErrMalformed)
		}
		d.strs[i] = d.cols[colStrBytes].bytes(uint64(n + 1))[:n]
	}
	return nil
}

// request writes out the WriteRequest: each series in Prometheus'
// marshaller's layout (labels, then samples; proto3's zero values
// omitted).
func (d *decoder) request(out []byte) ([]byte, error) {
	var ts []byte
	var last int64
	for range d.nSeries {
		ts = ts[:0]
		// Each label takes a name byte, each sample a tag byte at
		// least: a count past its column stops the loop at once.
		labels := d.count(colLabelCounts, colLabelNames, 1)
		for i := uint64(0); i < labels && d.err() == nil; i++ {
			ts = d.appendLabel(ts)
		}
		samples := d.count(colSampleCounts, colTags, 1)
		for i := uint64(0); i < samples && d.err() == nil; i++ {
			last += protowire.DecodeZigZag(d.cols[colTimestamps].uvarint())
			ts = appendSample(ts, d.value(), last)
		}
		if err := d.err(); err != nil {
			return nil, err
		}
		if len(out)+len(ts) > MaxDecoded {
			return nil, fmt.Errorf("%w: decodes to over %d bytes", ErrMalformed, MaxDecoded)
		}
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, ts)
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	for i := range d.cols {
		if len(d.cols[i].b) != 0 {
			return nil, fmt.Errorf("%w: column %d longer than its counts", ErrMalformed, i)
		}
	}
	return out, nil
}

// count reads a count from column c, failing it when the items would
// need more than the per bytes each left in column of.
func (d *decoder) count(c, of int, per uint64) uint64 {
	n := d.cols[c].uvarint()
	if n > uint64(len(d.cols[of].b))/per {
		d.cols[c].fail("a count larger than its column")
		return 0
	}
	return n
}

// err is the first column's error.
func (d *decoder) err() error {
	for i := range d.cols {
		if d.cols[i].err != nil {
			return d.cols[i].err
		}
	}
	return nil
}

func (d *decoder) appendLabel(dst []byte) []byte {
	name, value := d.label()
	if len(dst)+len(name)+len(value) > MaxDecoded {
		d.cols[colLabelNames].fail("decodes to too many bytes")
		return dst
	}
	size := 0
	if len(name) > 0 {
		size += 1 + protowire.SizeBytes(len(name))
	}
	if len(value) > 0 {
		size += 1 + protowire.SizeBytes(len(value))
	}
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(size))
	if len(name) > 0 {
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendBytes(dst, name)
	}
	if len(value) > 0 {
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendBytes(dst, value)
	}
	return dst
}

// label reads a label's name and value from their columns, as the
// encoder's parseLabel coded them: strings enter the table in order, so
// a name or a "new" value is the next one not yet used.
func (d *decoder) label() (name, value []byte) {
	ni := d.cols[colLabelNames].uvarint()
	if ni > d.used || ni >= uint64(len(d.strs)) {
		d.cols[colLabelNames].fail("a label name refers past the strings so far")
		return nil, nil
	}
	if ni == d.used {
		d.used++
	}
	var vi uint64
	last, seen := d.lastValue[ni]-1, d.lastValue[ni] != 0
	switch code := d.cols[colLabelValues].uvarint(); code {
	case 0:
		if !seen {
			d.cols[colLabelValues].fail("a label repeats a value its name never had")
			return nil, nil
		}
		vi = last
	case 1:
		vi = d.used
		d.used++
	default:
		vi = last + uint64(protowire.DecodeZigZag(code-2))
	}
	if vi >= d.used || vi >= uint64(len(d.strs)) {
		d.cols[colLabelValues].fail("a label value refers past the strings so far")
		return nil, nil
	}
	d.lastValue[ni] = vi + 1
	return d.strs[ni], d.strs[vi]
}

// value reads one sample's value bits from the tag, decimal and float
// columns.
func (d *decoder) value() uint64 {
	tag := d.cols[colTags].bytes(1)
	switch {
	case tag == nil:
		return 0
	case tag[0] == 0:
		f := d.cols[colFloats].bytes(8)
		if f == nil {
			return 0
		}
		return binary.LittleEndian.Uint64(f)
	case tag[0] <= 1+maxScale:
		m := protowire.DecodeZigZag(d.cols[colDecimals].uvarint())
		return math.Float64bits(float64(m) / pow10[tag[0]-1])
	}
	d.cols[colTags].fail("an unknown value tag")
	return 0
}

func appendSample(dst []byte, bits uint64, ts int64) []byte {
	size := 0
	if bits != 0 {
		size += 1 + 8
	}
	if ts != 0 {
		size += 1 + protowire.SizeVarint(uint64(ts))
	}
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(size))
	if bits != 0 {
		dst = protowire.AppendTag(dst, 1, protowire.Fixed64Type)
		dst = protowire.AppendFixed64(dst, bits)
	}
	if ts != 0 {
		dst = protowire.AppendTag(dst, 2, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(ts))
	}
	return dst
}
