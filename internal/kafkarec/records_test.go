package kafkarec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"unsafe"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/defaults"
)

// body builds an internal/batch body of recs.
func body(t testing.TB, recs ...[]byte) []byte {
	t.Helper()
	var b batch.Builder
	for _, r := range recs {
		if err := b.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// TestAppendRecordsLayout: the bytes of one record, worked out by hand
// from Kafka's record format, so that AppendRecords and Records cannot
// agree on something that is not Kafka's.
func TestAppendRecordsLayout(t *testing.T) {
	got, n, err := AppendRecords([]byte("x"), body(t, []byte("a")), []byte("e"), 5)
	if err != nil || n != 1 {
		t.Fatalf("%d records, %v", n, err)
	}
	want := []byte{'x',
		0x2a,       // length 21, zigzag
		0x00, 0x00, // attributes, timestampDelta 0
		0x00,      // offsetDelta 0
		0x02, 'e', // key "e"
		0x02, 'a', // value "a"
		0x02,                               // one header
		0x0c, 's', 'l', 'u', 'i', 'c', 'e', // key "sluice"
		0x0a, 1, 5, 0, 1, 'e', // value: version 1, message 5, index 0, count 1, agent "e"
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got  %x\nwant %x", got, want)
	}
}

// TestRecordsRoundTrip: what AppendRecords builds, Records accepts, with
// the values in order, aliasing the section; records of every length
// class (empty, one-byte and multi-byte varint lengths), offsetDeltas
// past one varint byte, and a message id of 64 bits.
func TestRecordsRoundTrip(t *testing.T) {
	var recs [][]byte
	for i := range 300 {
		recs = append(recs, bytes.Repeat([]byte{byte(i)}, i%5*40))
	}
	agent := []byte(strings.Repeat("a", defaults.MaxAgentIDLen))
	section, n, err := AppendRecords(nil, body(t, recs...), agent, 1<<64-1)
	if err != nil || n != len(recs) {
		t.Fatalf("%d records, %v", n, err)
	}
	seen := 0
	err = Records(section, agent, 1<<64-1, n, func(i int, v []byte) error {
		if i != seen || !bytes.Equal(v, recs[i]) {
			t.Fatalf("record %d (call %d): %x, want %x", i, seen, v, recs[i])
		}
		if len(v) > 0 && !aliases(section, v) {
			t.Fatalf("record %d: value does not alias the section", i)
		}
		seen++
		return nil
	})
	if err != nil || seen != n {
		t.Fatalf("%d of %d records, %v", seen, n, err)
	}
	// An empty message: an empty section.
	if s, n, err := AppendRecords(nil, body(t), agent, 1); err != nil || n != 0 || len(s) != 0 || Records(s, agent, 1, 0, nil) != nil {
		t.Fatalf("empty body: %x, %d, %v", s, n, err)
	}
}

// aliases reports whether v lies within s.
func aliases(s, v []byte) bool {
	p, base := uintptr(unsafe.Pointer(unsafe.SliceData(v))), uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return p >= base && p+uintptr(len(v)) <= base+uintptr(len(s))
}

// TestAppendRecordsRefuses: a malformed body or agent id is an error and
// leaves dst as it was.
func TestAppendRecordsRefuses(t *testing.T) {
	ok := body(t, []byte("a"))
	for name, c := range map[string]struct{ body, agent []byte }{
		"malformed body": {ok[:len(ok)-1], []byte("e")},
		"empty agent":    {ok, nil},
		"long agent":     {ok, make([]byte, defaults.MaxAgentIDLen+1)},
	} {
		dst, n, err := AppendRecords([]byte("x"), c.body, c.agent, 1)
		if err == nil || n != 0 || string(dst) != "x" {
			t.Errorf("%s: %q, %d, %v", name, dst, n, err)
		}
	}
	if _, _, err := AppendRecords(nil, ok[:len(ok)-1], []byte("e"), 1); !errors.Is(err, batch.ErrMalformed) {
		t.Errorf("malformed body: %v, want batch.ErrMalformed", err)
	}
}

// TestRecordsRefuses: every way a section can differ from what the sink
// expects is an ErrMalformed naming the record, never a panic; the
// violations are made by changing one field of a valid two-record section.
func TestRecordsRefuses(t *testing.T) {
	agent := []byte("edge-1")
	const message = 42
	good, _, err := AppendRecords(nil, body(t, []byte("v0"), []byte("value1")), agent, message)
	if err != nil {
		t.Fatal(err)
	}
	// The second record, rebuilt with one field changed.
	rec := func(change func(f *fields)) []byte {
		f := fields{attributes: 0, offsetDelta: 1, key: agent, value: []byte("value1"), headers: 1, hkey: []byte(HeaderSluice),
			hvalue: AppendHeaderValue(nil, RecordHeaders{Agent: agent, Message: message, Index: 1, Count: 2})}
		change(&f)
		return f.encode()
	}
	first := good[:good[0]>>1+1] // its length fits one byte
	cases := map[string]struct {
		section []byte
		count   int
		record  int
	}{
		"valid rebuilt":       {append(first[:len(first):len(first)], rec(func(*fields) {})...), 2, -2},
		"one record missing":  {first, 2, 1},
		"one record too many": {good, 1, 0}, // its header says 2
		"trailing byte":       {append(good[:len(good):len(good)], 0), 2, -1},
		"negative count":      {good, -1, -1},
		"attributes":          {append(first, rec(func(f *fields) { f.attributes = 1 })...), 2, 1},
		"timestampDelta":      {append(first, rec(func(f *fields) { f.timestampDelta = 7 })...), 2, 1},
		"offsetDelta":         {append(first, rec(func(f *fields) { f.offsetDelta = 0 })...), 2, 1},
		"other key":           {append(first, rec(func(f *fields) { f.key = []byte("edge-2") })...), 2, 1},
		"null key":            {append(first, rec(func(f *fields) { f.key = nil })...), 2, 1},
		"no header":           {append(first, rec(func(f *fields) { f.headers = 0 })...), 2, 1},
		"two headers":         {append(first, rec(func(f *fields) { f.headers = 2; f.extra = []byte{0x02, 'x', 0x00} })...), 2, 1},
		"other header key":    {append(first, rec(func(f *fields) { f.hkey = []byte("sluicy") })...), 2, 1},
		"header of message 43": {append(first, rec(func(f *fields) {
			f.hvalue = AppendHeaderValue(nil, RecordHeaders{Agent: agent, Message: 43, Index: 1, Count: 2})
		})...), 2, 1},
		"header index 0": {append(first, rec(func(f *fields) {
			f.hvalue = AppendHeaderValue(nil, RecordHeaders{Agent: agent, Message: 42, Index: 0, Count: 2})
		})...), 2, 1},
		"header count 3": {append(first, rec(func(f *fields) {
			f.hvalue = AppendHeaderValue(nil, RecordHeaders{Agent: agent, Message: 42, Index: 1, Count: 3})
		})...), 2, 1},
		"header other agent": {append(first, rec(func(f *fields) {
			f.hvalue = AppendHeaderValue(nil, RecordHeaders{Agent: []byte("x"), Message: 42, Index: 1, Count: 2})
		})...), 2, 1},
		"malformed header":    {append(first, rec(func(f *fields) { f.hvalue = []byte{2} })...), 2, 1},
		"bytes after header":  {append(first, rec(func(f *fields) { f.extra = []byte{0} })...), 2, 1},
		"long varint":         {append(first, rec(func(f *fields) { f.longOffsetDelta = true })...), 2, 1},
		"value past record":   {append(first, rec(func(f *fields) { f.valueLenDelta = 100 })...), 2, 1},
		"negative value len":  {append(first, rec(func(f *fields) { f.valueLenDelta = -7 })...), 2, 1},
		"length past section": {good[:len(good)-1], 2, 1},
		"truncated length":    {append(first[:len(first):len(first)], 0x80), 2, 1},
		"negative length":     {append(first[:len(first):len(first)], 0x01), 2, 1},
		"overlong varint":     {append(first[:len(first):len(first)], bytes.Repeat([]byte{0xff}, 11)...), 2, 1},
	}
	for name, c := range cases {
		err := Records(c.section, agent, message, c.count, nil)
		if c.record == -2 {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		var me *MalformedError
		if !errors.Is(err, ErrMalformed) || !errors.As(err, &me) || me.Record != c.record || strings.Contains(me.Reason, "a bug of this package") {
			t.Errorf("%s: %v, want ErrMalformed at record %d", name, err, c.record)
		}
	}
	// fn's error comes back as it is.
	stop := errors.New("stop")
	if err := Records(good, agent, message, 2, func(int, []byte) error { return stop }); err != stop {
		t.Errorf("fn's error: %v", err)
	}
}

// fields are a record's, for building malformed ones.
type fields struct {
	attributes      byte
	timestampDelta  int64
	offsetDelta     int64
	longOffsetDelta bool // offsetDelta in two bytes, not its shortest form
	key, value      []byte
	valueLenDelta   int64
	headers         int64
	hkey, hvalue    []byte
	extra           []byte // after the header
}

func (f fields) encode() []byte {
	var b []byte
	b = append(b, f.attributes)
	b = binary.AppendVarint(b, f.timestampDelta)
	if f.longOffsetDelta {
		b = append(b, byte(f.offsetDelta<<1)|0x80, 0)
	} else {
		b = binary.AppendVarint(b, f.offsetDelta)
	}
	if f.key == nil {
		b = binary.AppendVarint(b, -1)
	} else {
		b = binary.AppendVarint(b, int64(len(f.key)))
		b = append(b, f.key...)
	}
	b = binary.AppendVarint(b, int64(len(f.value))+f.valueLenDelta)
	b = append(b, f.value...)
	b = binary.AppendVarint(b, f.headers)
	b = binary.AppendVarint(b, int64(len(f.hkey)))
	b = append(b, f.hkey...)
	b = binary.AppendVarint(b, int64(len(f.hvalue)))
	b = append(b, f.hvalue...)
	b = append(b, f.extra...)
	return append(binary.AppendVarint(nil, int64(len(b))), b...)
}

// TestNoAllocsPerRecord: once dst has room, AppendRecords allocates
// nothing, and Records allocates nothing on a valid section, whatever the
// number of records.
func TestNoAllocsPerRecord(t *testing.T) {
	recs := make([][]byte, 1000)
	for i := range recs {
		recs[i] = []byte(fmt.Sprintf("record %d", i))
	}
	b := body(t, recs...)
	agent := []byte("edge-1")
	dst, _, err := AppendRecords(nil, b, agent, 7)
	if err != nil {
		t.Fatal(err)
	}
	var values int
	fn := func(int, []byte) error { values++; return nil }
	if a := testing.AllocsPerRun(20, func() { dst, _, _ = AppendRecords(dst[:0], b, agent, 7) }); a != 0 {
		t.Errorf("AppendRecords: %.1f allocations per call of 1000 records", a)
	}
	if a := testing.AllocsPerRun(20, func() { _ = Records(dst, agent, 7, len(recs), fn) }); a != 0 {
		t.Errorf("Records: %.1f allocations per call of 1000 records", a)
	}
	if values == 0 {
		t.Fatal("Records called fn for no record")
	}
}

// TestAppendBatchHeader: the header's fields at Kafka's offsets, the
// length and CRC-32C over the compressed bytes, and the refusals.
func TestAppendBatchHeader(t *testing.T) {
	compressed := []byte("compressed records")
	h := BatchHeader{Records: 300, Timestamp: 1_700_000_000_123, ProducerID: 77, ProducerEpoch: 3, BaseSequence: 1000}
	b, err := AppendBatch([]byte("xy"), h, compressed)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:2]) != "xy" || len(b) != 2+BatchHeaderLen+len(compressed) {
		t.Fatalf("%d bytes", len(b))
	}
	b = b[2:]
	be := binary.BigEndian
	for _, f := range []struct {
		name      string
		got, want uint64
	}{
		{"baseOffset", be.Uint64(b[0:]), 0},
		{"batchLength", uint64(be.Uint32(b[8:])), uint64(49 + len(compressed))},
		{"partitionLeaderEpoch", uint64(be.Uint32(b[12:])), 0xffffffff},
		{"magic", uint64(b[16]), 2},
		{"crc", uint64(be.Uint32(b[17:])), uint64(crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))},
		{"attributes", uint64(be.Uint16(b[21:])), 4},
		{"lastOffsetDelta", uint64(be.Uint32(b[23:])), 299},
		{"baseTimestamp", be.Uint64(b[27:]), 1_700_000_000_123},
		{"maxTimestamp", be.Uint64(b[35:]), 1_700_000_000_123},
		{"producerId", be.Uint64(b[43:]), 77},
		{"producerEpoch", uint64(be.Uint16(b[51:])), 3},
		{"baseSequence", uint64(be.Uint32(b[53:])), 1000},
		{"records", uint64(be.Uint32(b[57:])), 300},
	} {
		if f.got != f.want {
			t.Errorf("%s: %d, want %d", f.name, f.got, f.want)
		}
	}
	if !bytes.Equal(b[BatchHeaderLen:], compressed) {
		t.Error("compressed bytes changed")
	}
	if _, err := AppendBatch(nil, BatchHeader{Records: 0}, compressed); err == nil {
		t.Error("a batch of 0 records: no error")
	}
}
