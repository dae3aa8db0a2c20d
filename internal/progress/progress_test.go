package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestBar(t *testing.T) {
	var buf bytes.Buffer
	b := NewBar(&buf)
	b.Update(25<<20, 100<<20)
	if s := buf.String(); !strings.Contains(s, " 25% 25 MiB/100 MiB") || !strings.Contains(s, "ETA") || !strings.HasPrefix(s, "\r[") {
		t.Fatalf("bar %q", s)
	}
	b.Update(100<<20, 100<<20) // the last update is always drawn
	b.Finish()
	if s := buf.String(); !strings.Contains(s, "100% 100 MiB/100 MiB") || !strings.HasSuffix(s, "\n") {
		t.Fatalf("bar %q", s)
	}
	if IsTerminal(&buf) {
		t.Fatal("a buffer is not a terminal")
	}
	f, _ := os.CreateTemp(t.TempDir(), "x")
	defer f.Close()
	if IsTerminal(f) {
		t.Fatal("a file is not a terminal")
	}
}
