package batch_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/testkit/fuzzseed"
)

// FuzzDecode feeds arbitrary bodies to Decode and Count. Neither may panic;
// they must agree; an error must be a *MalformedError with an offset inside
// the body; and a body that decodes must be exactly what a Builder makes of
// its records (the format has one encoding per batch).
//
// Seeds are in testdata/fuzz/FuzzDecode, valid bodies among them.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{0xB1, 0x01, 0x00})
	f.Add([]byte{0xB1, 0x01, 0x02, 0x01, 'a', 0x00})
	f.Add([]byte{0xB1, 0x01, 0x01, 0x05, 'a', 'b'})

	var b batch.Builder
	f.Fuzz(func(t *testing.T, body []byte) {
		b.Reset()
		err := batch.Decode(body, func(rec []byte) error {
			if cap(rec) != len(rec) {
				t.Fatalf("record cap %d != len %d", cap(rec), len(rec))
			}
			return b.Add(rec)
		})
		n, countErr := batch.Count(body)
		if (err == nil) != (countErr == nil) {
			t.Fatalf("Decode error %v, Count error %v", err, countErr)
		}
		if err != nil {
			var me *batch.MalformedError
			if !errors.As(err, &me) || !errors.Is(err, batch.ErrMalformed) {
				t.Fatalf("Decode error %v (%T) is not a *MalformedError", err, err)
			}
			if me.Offset < 0 || me.Offset > len(body) || me.Record < -1 || me.Record >= batch.MaxRecords {
				t.Fatalf("Decode error %+v out of range for a %d-byte body", me, len(body))
			}
			if b.Count() != 0 {
				t.Fatalf("Decode called fn %d times on a malformed body", b.Count())
			}
			return
		}
		if n != b.Count() {
			t.Fatalf("Count = %d, Decode saw %d records", n, b.Count())
		}
		if rebuilt := b.Bytes(); !bytes.Equal(rebuilt, body) {
			t.Fatalf("rebuilt body % X differs from decoded body % X", rebuilt, body)
		}
	})
}

// TestFuzzCorpus keeps the committed seed corpus honest: files named valid-*
// hold well-formed bodies, files named bad-* malformed ones.
func TestFuzzCorpus(t *testing.T) {
	fuzzseed.Check(t, filepath.Join("testdata", "fuzz", "FuzzDecode"), batch.ErrMalformed, 3, 0, func(in []byte) error { return batch.Decode(in, nil) })
}
