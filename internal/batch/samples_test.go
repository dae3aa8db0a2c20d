package batch

import (
	"bytes"
	"testing"
)

// PackSamples packs binary records (newlines and all) into bodies of at
// most messageBytes that decode to the same records in order; a record
// larger than messageBytes is a body of its own.
func TestPackSamples(t *testing.T) {
	recs := [][]byte{[]byte("a\nb"), bytes.Repeat([]byte{0xff}, 300), []byte("c"), bytes.Repeat([]byte{0}, 2000), []byte("d\x00")}
	samples, err := PackSamples(recs, 1024)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	for _, s := range samples {
		n := 0
		if err := Decode(s, func(r []byte) error { got = append(got, append([]byte(nil), r...)); n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if len(s) > 1024 && n > 1 {
			t.Errorf("a body of %d bytes holds %d records, more than one past messageBytes", len(s), n)
		}
	}
	if len(samples) != 3 {
		t.Errorf("%d bodies, want 3 (the small ones, the 2000-byte record alone, the last)", len(samples))
	}
	if len(got) != len(recs) {
		t.Fatalf("decoded %d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		if !bytes.Equal(got[i], recs[i]) {
			t.Errorf("record %d: %q, want %q", i, got[i], recs[i])
		}
	}
}
