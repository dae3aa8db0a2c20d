package batch_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/batch"
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
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	valid := 0
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		// The go test fuzz v1 format: a header line, then one []byte("...")
		// line per fuzz argument.
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" ||
			!strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
			t.Fatalf("%s: not a go test fuzz v1 file with one []byte", e.Name())
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		err = batch.Decode([]byte(s), nil)
		switch {
		case strings.HasPrefix(e.Name(), "valid-"):
			valid++
			if err != nil {
				t.Errorf("%s: %v", e.Name(), err)
			}
		case strings.HasPrefix(e.Name(), "bad-"):
			if !errors.Is(err, batch.ErrMalformed) {
				t.Errorf("%s: Decode = %v, want ErrMalformed", e.Name(), err)
			}
		}
	}
	if valid < 3 {
		t.Errorf("%d valid-* seeds in %s, want at least 3", valid, dir)
	}
}
