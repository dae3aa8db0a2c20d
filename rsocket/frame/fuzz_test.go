package frame

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// FuzzFrame feeds arbitrary bytes to the decoder. It must never panic,
// every failure must be a classified *DecodeError, and every frame that
// parses must survive encode -> decode (checkRoundTrip). The seed corpus in
// testdata/fuzz/FuzzFrame holds one golden frame per type (regenerate with
// go test -run TestWriteSeedCorpus -update-corpus).
func FuzzFrame(f *testing.F) {
	for _, g := range goldens() {
		f.Add(unhex(f, g.hex))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkRoundTrip(t, b)
	})
}

// FuzzLengthPrefixed feeds arbitrary byte streams to ReadLengthPrefixed and
// parses what comes out.
func FuzzLengthPrefixed(f *testing.F) {
	var s []byte
	for _, g := range goldens() {
		fr := unhex(f, g.hex)
		s, _ = AppendLengthPrefix(s, len(fr))
		s = append(s, fr...)
	}
	f.Add(s, 0)
	f.Add([]byte{0xff, 0xff, 0xff, 0}, 100)
	f.Fuzz(func(t *testing.T, b []byte, max int) {
		r := bytes.NewReader(b)
		var buf []byte
		for i := 0; i < 1000; i++ {
			fr, err := ReadLengthPrefixed(r, buf, max)
			if err != nil {
				return
			}
			if max > 0 && len(fr) > max {
				t.Fatalf("frame of %d bytes over limit %d", len(fr), max)
			}
			_, _ = Validate(fr)
			buf = fr
		}
	})
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz seed files from the golden frames")

// TestWriteSeedCorpus keeps the committed seed corpus in step with the
// golden frames: with -update-corpus it writes them, otherwise it checks
// that every golden frame is there.
func TestWriteSeedCorpus(t *testing.T) {
	type seed struct{ name, content string }
	var seeds []seed
	var stream []byte
	for _, g := range goldens() {
		fr := unhex(t, g.hex)
		seeds = append(seeds, seed{filepath.Join("FuzzFrame", "golden-"+sanitize(g.name)), corpusFile(fr)})
		stream, _ = AppendLengthPrefix(stream, len(fr))
		stream = append(stream, fr...)
	}
	seeds = append(seeds, seed{filepath.Join("FuzzLengthPrefixed", "golden-all-types"), corpusFile(stream, 0)})
	for _, sd := range seeds {
		name := filepath.Join("testdata", "fuzz", sd.name)
		dir, content := filepath.Dir(name), sd.content
		if *updateCorpus {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(name)
		if err != nil || string(got) != content {
			t.Errorf("seed %s missing or stale (run with -update-corpus): %v", name, err)
		}
	}
}

// corpusFile renders values in the "go test fuzz v1" format.
func corpusFile(vals ...any) string {
	s := "go test fuzz v1\n"
	for _, v := range vals {
		switch v := v.(type) {
		case []byte:
			s += "[]byte(" + strconv.Quote(string(v)) + ")\n"
		case int:
			s += fmt.Sprintf("int(%d)\n", v)
		}
	}
	return s
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '-'
		}
	}
	return string(b)
}
