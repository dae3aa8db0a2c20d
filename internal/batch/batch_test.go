package batch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"testing/quick"

	"github.com/sluicehq/sluice/internal/batch"
)

// build returns the body of records, built with a fresh Builder.
func build(t testing.TB, records ...[]byte) []byte {
	t.Helper()
	var b batch.Builder
	for _, r := range records {
		if err := b.Add(r); err != nil {
			t.Fatalf("Add: %v", err)
		}
	}
	return bytes.Clone(b.Bytes())
}

// decodeAll returns copies of the records in body.
func decodeAll(body []byte) ([][]byte, error) {
	recs := [][]byte{}
	err := batch.Decode(body, func(rec []byte) error {
		recs = append(recs, bytes.Clone(rec))
		return nil
	})
	return recs, err
}

func TestDecodeGood(t *testing.T) {
	big := bytes.Repeat([]byte{'x'}, 300)
	many := make([][]byte, 128)
	manyBody := []byte{0xB1, 0x01, 0x80, 0x01} // count 128: two-byte uvarint
	for i := range many {
		many[i] = []byte{byte(i)}
		manyBody = append(manyBody, 1, byte(i))
	}
	for _, tc := range []struct {
		name string
		body []byte
		want [][]byte
	}{
		{"empty batch", []byte{0xB1, 0x01, 0x00}, [][]byte{}},
		{"one empty record", []byte{0xB1, 0x01, 0x01, 0x00}, [][]byte{{}}},
		{"doc example", []byte{0xB1, 0x01, 0x02, 0x01, 'a', 0x00}, [][]byte{[]byte("a"), {}}},
		{"three records", []byte("\xB1\x01\x03\x03one\x03two\x05three"),
			[][]byte{[]byte("one"), []byte("two"), []byte("three")}},
		{"binary record", []byte{0xB1, 0x01, 0x01, 0x03, 0x00, 0xB1, 0xFF}, [][]byte{{0x00, 0xB1, 0xFF}}},
		{"300-byte record, two-byte length", append([]byte{0xB1, 0x01, 0x01, 0xAC, 0x02}, big...), [][]byte{big}},
		{"128 records, two-byte count", manyBody, many},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeAll(tc.body)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Decode records = %q, want %q", got, tc.want)
			}
			n, err := batch.Count(tc.body)
			if err != nil || n != len(tc.want) {
				t.Fatalf("Count = %d, %v; want %d, nil", n, err, len(tc.want))
			}
			// The format has one encoding per batch: building the records
			// again gives the same bytes.
			if rebuilt := build(t, tc.want...); !bytes.Equal(rebuilt, tc.body) {
				t.Fatalf("rebuilt body = % X, want % X", rebuilt, tc.body)
			}
		})
	}
}

func TestDecodeMalformed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   []byte
		offset int
		record int
		reason string // substring of MalformedError.Reason
	}{
		// Header.
		{"nil", nil, 0, -1, "empty body"},
		{"empty", []byte{}, 0, -1, "empty body"},
		{"bad magic", []byte{0xB2, 0x01, 0x00}, 0, -1, "bad magic 0xB2"},
		{"magic only", []byte{0xB1}, 1, -1, "before the version"},
		{"version 0", []byte{0xB1, 0x00, 0x00}, 1, -1, "unsupported format version 0"},
		{"version 2", []byte{0xB1, 0x02, 0x00}, 1, -1, "unsupported format version 2"},
		{"no count", []byte{0xB1, 0x01}, 2, -1, "record count: truncated uvarint"},
		{"truncated count", []byte{0xB1, 0x01, 0x80}, 2, -1, "record count: truncated uvarint"},
		{"overlong count", []byte{0xB1, 0x01, 0x81, 0x00, 0x00, 0x00}, 2, -1, "record count: uvarint not in shortest form"},
		{"overflowing count", []byte("\xB1\x01\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x7F"), 2, -1, "record count: uvarint overflows"},
		{"count over MaxRecords", binary.AppendUvarint([]byte{0xB1, 0x01}, batch.MaxRecords+1), 2, -1, "exceeds MaxRecords"},
		{"count over remaining bytes", []byte{0xB1, 0x01, 0x03, 0x00, 0x00}, 2, -1, "record count 3 cannot fit in the 2 bytes left"},

		// Records.
		{"length over remaining bytes", []byte{0xB1, 0x01, 0x01, 0x05, 'a', 'b'}, 3, 0, "record length 5 exceeds the 2 bytes left"},
		{"second length over remaining bytes", []byte{0xB1, 0x01, 0x02, 0x01, 'a', 0x02, 'b'}, 5, 1, "record length 2 exceeds the 1 bytes left"},
		{"huge length", []byte("\xB1\x01\x01\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x01"), 3, 0, "exceeds the 0 bytes left"},
		{"truncated length", []byte{0xB1, 0x01, 0x02, 0x00, 0x80}, 4, 1, "record length: truncated uvarint"},
		{"overlong length", []byte{0xB1, 0x01, 0x01, 0x80, 0x00}, 3, 0, "record length: uvarint not in shortest form"},
		{"overflowing length", []byte("\xB1\x01\x01\x80\x80\x80\x80\x80\x80\x80\x80\x80\x02"), 3, 0, "record length: uvarint overflows"},

		// Count mismatch and trailing garbage.
		{"count says more records", []byte{0xB1, 0x01, 0x03, 0x01, 'a', 0x00}, 6, 2, "body ends after 2 of the 3 records"},
		{"count says fewer records", []byte{0xB1, 0x01, 0x01, 0x01, 'a', 0x01, 'b'}, 5, -1, "2 trailing bytes after the 1 records"},
		{"trailing byte after empty batch", []byte{0xB1, 0x01, 0x00, 0x00}, 3, -1, "1 trailing bytes"},
		{"two bodies back to back", []byte{0xB1, 0x01, 0x00, 0xB1, 0x01, 0x00}, 3, -1, "3 trailing bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			called := false
			err := batch.Decode(tc.body, func([]byte) error { called = true; return nil })
			if called {
				t.Errorf("Decode called fn on a malformed body")
			}
			checkMalformed(t, "Decode", err, tc.offset, tc.record, tc.reason)
			n, err := batch.Count(tc.body)
			if n != 0 {
				t.Errorf("Count = %d on a malformed body, want 0", n)
			}
			checkMalformed(t, "Count", err, tc.offset, tc.record, tc.reason)
		})
	}
}

func checkMalformed(t *testing.T, what string, err error, offset, record int, reason string) {
	t.Helper()
	if !errors.Is(err, batch.ErrMalformed) {
		t.Fatalf("%s error = %v, want one wrapping ErrMalformed", what, err)
	}
	var me *batch.MalformedError
	if !errors.As(err, &me) {
		t.Fatalf("%s error = %T, want *MalformedError", what, err)
	}
	if me.Offset != offset || me.Record != record || !strings.Contains(me.Reason, reason) {
		t.Errorf("%s error = {Offset: %d, Record: %d, Reason: %q}, want {Offset: %d, Record: %d, Reason containing %q}",
			what, me.Offset, me.Record, me.Reason, offset, record, reason)
	}
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("byte %d", offset)) {
		t.Errorf("%s error %q does not name byte %d", what, msg, offset)
	}
}

func TestDecodeStopsOnCallbackError(t *testing.T) {
	body := build(t, []byte("a"), []byte("b"), []byte("c"))
	stop := errors.New("stop")
	var seen []string
	err := batch.Decode(body, func(rec []byte) error {
		seen = append(seen, string(rec))
		if string(rec) == "b" {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("Decode error = %v, want the callback's error as is", err)
	}
	if want := []string{"a", "b"}; !reflect.DeepEqual(seen, want) {
		t.Fatalf("records seen = %q, want %q", seen, want)
	}
}

func TestDecodeNilCallbackValidates(t *testing.T) {
	if err := batch.Decode(build(t, []byte("a")), nil); err != nil {
		t.Fatalf("Decode(valid, nil) = %v", err)
	}
	if err := batch.Decode([]byte{0xB1, 0x01, 0x01}, nil); !errors.Is(err, batch.ErrMalformed) {
		t.Fatalf("Decode(malformed, nil) = %v, want ErrMalformed", err)
	}
}

func TestDecodeIsZeroCopy(t *testing.T) {
	body := build(t, []byte("first"), []byte("second"))
	err := batch.Decode(body, func(rec []byte) error {
		if string(rec) == "first" {
			if &rec[0] != &body[4] {
				t.Errorf("record does not alias the body")
			}
			// Capacity is capped, so appending cannot overwrite the next
			// record's bytes.
			if cap(rec) != len(rec) {
				t.Errorf("cap(rec) = %d, want %d", cap(rec), len(rec))
			}
			_ = append(rec, "XXXX"...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := decodeAll(body); string(got[1]) != "second" {
		t.Fatalf("second record = %q after appending to the first", got[1])
	}
}

func TestBuilder(t *testing.T) {
	var b batch.Builder
	if got, want := b.Bytes(), []byte{0xB1, 0x01, 0x00}; !bytes.Equal(got, want) {
		t.Fatalf("zero Builder Bytes = % X, want % X", got, want)
	}
	if b.Len() != 3 || b.Count() != 0 {
		t.Fatalf("zero Builder Len, Count = %d, %d; want 3, 0", b.Len(), b.Count())
	}

	for i := range 2 { // the second round reuses the buffer
		for _, r := range []string{"a", ""} {
			if want := b.LenWith(len(r)); b.Add([]byte(r)) != nil || b.Len() != want {
				t.Fatalf("round %d: Len after Add = %d, LenWith predicted %d", i, b.Len(), want)
			}
		}
		got := b.Bytes()
		if want := []byte{0xB1, 0x01, 0x02, 0x01, 'a', 0x00}; !bytes.Equal(got, want) {
			t.Fatalf("round %d: Bytes = % X, want % X", i, got, want)
		}
		if cap(got) != len(got) || b.Len() != len(got) || b.Count() != 2 {
			t.Fatalf("round %d: cap, len(Bytes), Len, Count = %d, %d, %d, %d; want 6, 6, 6, 2",
				i, cap(got), len(got), b.Len(), b.Count())
		}
		b.Reset()
		if b.Len() != 3 || b.Count() != 0 {
			t.Fatalf("round %d: after Reset Len, Count = %d, %d; want 3, 0", i, b.Len(), b.Count())
		}
	}
}

func TestBuilderAddCopies(t *testing.T) {
	var b batch.Builder
	rec := []byte("abc")
	if err := b.Add(rec); err != nil {
		t.Fatal(err)
	}
	rec[0] = 'X'
	if got, _ := decodeAll(b.Bytes()); string(got[0]) != "abc" {
		t.Fatalf("record = %q after changing the caller's slice, want \"abc\"", got[0])
	}
}

// TestHeaderGrowth crosses the counts at which the count uvarint gets longer
// (the Builder's header moves within its headroom).
func TestHeaderGrowth(t *testing.T) {
	var b batch.Builder
	for _, count := range []int{0, 1, 127, 128, 129, 16383, 16384, 1<<21 - 1, 1 << 21} {
		b.Reset()
		b.Grow(2 * count)
		for i := range count {
			if want := b.LenWith(1); b.Add([]byte{byte(i)}) != nil || b.Len() != want {
				t.Fatalf("count %d: Len after Add = %d, LenWith predicted %d", count, b.Len(), want)
			}
		}
		body := b.Bytes()
		wantHeader := binary.AppendUvarint([]byte{0xB1, 0x01}, uint64(count))
		if !bytes.HasPrefix(body, wantHeader) || len(body) != len(wantHeader)+2*count || len(body) != b.Len() {
			t.Fatalf("count %d: body of %d bytes starting % X, want %d bytes starting % X",
				count, len(body), body[:min(len(body), 8)], len(wantHeader)+2*count, wantHeader)
		}
		i := 0
		err := batch.Decode(body, func(rec []byte) error {
			if len(rec) != 1 || rec[0] != byte(i) {
				return fmt.Errorf("record %d = % X", i, rec)
			}
			i++
			return nil
		})
		if err != nil || i != count {
			t.Fatalf("count %d: Decode = %v after %d records", count, err, i)
		}
	}
}

func TestMaxRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 16 MiB body")
	}
	var b batch.Builder
	b.Grow(batch.MaxRecords)
	for range batch.MaxRecords {
		if err := b.Add(nil); err != nil {
			t.Fatalf("Add after %d records: %v", b.Count(), err)
		}
	}
	if err := b.Add(nil); !errors.Is(err, batch.ErrTooManyRecords) {
		t.Fatalf("Add of record MaxRecords+1 = %v, want ErrTooManyRecords", err)
	}
	body := b.Bytes()
	if len(body) != 6+batch.MaxRecords || b.Count() != batch.MaxRecords {
		t.Fatalf("len(body), Count = %d, %d; want %d, %d", len(body), b.Count(), 6+batch.MaxRecords, batch.MaxRecords)
	}
	if n, err := batch.Count(body); err != nil || n != batch.MaxRecords {
		t.Fatalf("Count = %d, %v; want %d, nil", n, err, batch.MaxRecords)
	}
}

// TestRoundTripQuick checks that any records come back unchanged, in order,
// through a Builder that is reused between batches.
func TestRoundTripQuick(t *testing.T) {
	var b batch.Builder
	roundTrip := func(records [][]byte) bool {
		b.Reset()
		for _, r := range records {
			if err := b.Add(r); err != nil {
				t.Logf("Add: %v", err)
				return false
			}
		}
		body := b.Bytes()
		if len(body) != b.Len() {
			t.Logf("len(Bytes) = %d, Len = %d", len(body), b.Len())
			return false
		}
		if n, err := batch.Count(body); err != nil || n != len(records) {
			t.Logf("Count = %d, %v; want %d", n, err, len(records))
			return false
		}
		got, err := decodeAll(body)
		if err != nil {
			t.Logf("Decode: %v", err)
			return false
		}
		if len(got) != len(records) {
			return false
		}
		for i := range got {
			if !bytes.Equal(got[i], records[i]) {
				return false
			}
		}
		return true
	}
	cfg := &quick.Config{
		MaxCount: 2000,
		Rand:     rand.New(rand.NewSource(1)),
		Values: func(args []reflect.Value, r *rand.Rand) {
			args[0] = reflect.ValueOf(randomRecords(r))
		},
	}
	if err := quick.Check(roundTrip, cfg); err != nil {
		t.Fatal(err)
	}
}

// randomRecords returns up to 300 records whose lengths cross the 1-, 2- and
// 3-byte uvarint boundaries.
func randomRecords(r *rand.Rand) [][]byte {
	lengths := []int{0, 1, 2, 127, 128, 129, 16383, 16384}
	recs := make([][]byte, r.Intn(300))
	for i := range recs {
		var n int
		if r.Intn(8) == 0 {
			n = lengths[r.Intn(len(lengths))]
		} else {
			n = r.Intn(64)
		}
		recs[i] = make([]byte, n)
		for j := range recs[i] {
			recs[i][j] = byte(r.Uint32())
		}
	}
	return recs
}

// TestTruncationsAreMalformed cuts valid bodies at every length: every proper
// prefix is malformed (a body's count fixes where it ends), and so is every
// body with a byte appended.
func TestTruncationsAreMalformed(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for range 50 {
		body := build(t, randomRecords(r)[:r.Intn(20)]...)
		for n := range len(body) {
			if err := batch.Decode(body[:n], nil); !errors.Is(err, batch.ErrMalformed) {
				t.Fatalf("Decode of the first %d of %d bytes = %v, want ErrMalformed", n, len(body), err)
			}
		}
		if err := batch.Decode(append(bytes.Clone(body), 0), nil); !errors.Is(err, batch.ErrMalformed) {
			t.Fatalf("Decode with a trailing byte = %v, want ErrMalformed", err)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	rec := bytes.Repeat([]byte{'r'}, 100)
	var b batch.Builder
	fill := func() {
		b.Reset()
		for range 100 {
			_ = b.Add(rec)
		}
	}
	fill() // warm up: grow the buffer
	if n := testing.AllocsPerRun(100, func() { fill(); _ = b.Bytes() }); n != 0 {
		t.Errorf("Builder Reset+Add+Bytes: %v allocs, want 0", n)
	}
	body := b.Bytes()
	total := 0
	if n := testing.AllocsPerRun(100, func() {
		_ = batch.Decode(body, func(rec []byte) error { total += len(rec); return nil })
	}); n != 0 {
		t.Errorf("Decode: %v allocs, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = batch.Count(body) }); n != 0 {
		t.Errorf("Count: %v allocs, want 0", n)
	}
}

// TestSize: Size predicts the body a Builder makes, for any records.
func TestSize(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 200; trial++ {
		var recs [][]byte
		var b batch.Builder
		for i := rng.Intn(300); i > 0; i-- {
			r := make([]byte, rng.Intn(1<<uint(rng.Intn(16))))
			recs = append(recs, r)
			b.Add(r)
		}
		if got, want := batch.Size(recs), len(b.Bytes()); got != want {
			t.Fatalf("trial %d: Size %d, body %d", trial, got, want)
		}
	}
}
