package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

func TestXferProgressBar(t *testing.T) {
	var buf bytes.Buffer
	b := &progressBar{w: &buf, start: time.Now()}
	b.update(25<<20, 100<<20)
	if s := buf.String(); !strings.Contains(s, " 25% 25 MiB/100 MiB") || !strings.Contains(s, "ETA") || !strings.HasPrefix(s, "\r[") {
		t.Fatalf("bar %q", s)
	}
	b.update(100<<20, 100<<20) // the last update is always drawn
	b.finish()
	if s := buf.String(); !strings.Contains(s, "100% 100 MiB/100 MiB") || !strings.HasSuffix(s, "\n") {
		t.Fatalf("bar %q", s)
	}
	if isTerminal(&buf) {
		t.Fatal("a buffer is not a terminal")
	}
	f, _ := os.CreateTemp(t.TempDir(), "x")
	defer f.Close()
	if isTerminal(f) {
		t.Fatal("a file is not a terminal")
	}
}

func TestXferChunkFlag(t *testing.T) {
	var c chunkFlag
	for in, want := range map[string]string{"auto": "auto", "64KiB": "64KiB", "1MiB": "1MiB"} {
		if err := c.Set(in); err != nil || c.String() != want {
			t.Errorf("%s: %v %s", in, err, c.String())
		}
	}
	for _, bad := range []string{"0", "9MiB", "x"} {
		if err := c.Set(bad); err == nil {
			t.Errorf("--chunk %s accepted", bad)
		}
	}
}
