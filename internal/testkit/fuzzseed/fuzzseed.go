// Package fuzzseed keeps a committed seed corpus of a fuzz target honest:
// the decoders' tests (batch, storedmsg) each read their corpus files by
// hand, the same way, before this.
package fuzzseed

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Check reads every file of dir, the seed corpus of a fuzz target that
// takes one []byte, and calls decode on its input: a file named valid-*
// must decode, one named bad-* must fail with an error that is
// malformed. There must be at least minValid valid-* and minBad bad-*
// files, so that a corpus emptied by mistake fails too.
func Check(t *testing.T, dir string, malformed error, minValid, minBad int, decode func([]byte) error) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	valid, bad := 0, 0
	for _, e := range entries {
		in := input(t, filepath.Join(dir, e.Name()))
		err := decode(in)
		switch {
		case strings.HasPrefix(e.Name(), "valid-"):
			valid++
			if err != nil {
				t.Errorf("%s: %v", e.Name(), err)
			}
		case strings.HasPrefix(e.Name(), "bad-"):
			bad++
			if !errors.Is(err, malformed) {
				t.Errorf("%s: Decode = %v, want %v", e.Name(), err, malformed)
			}
		}
	}
	if valid < minValid || bad < minBad {
		t.Errorf("%d valid-* and %d bad-* seeds in %s, want at least %d and %d", valid, bad, dir, minValid, minBad)
	}
}

// input is the []byte of a corpus file in the go test fuzz v1 format: a
// header line, then one []byte("...") line per fuzz argument (here one).
func input(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" ||
		!strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
		t.Fatalf("%s: not a go test fuzz v1 file with one []byte", filepath.Base(path))
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	return []byte(s)
}
