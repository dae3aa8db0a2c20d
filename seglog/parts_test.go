package seglog

import (
	"bytes"
	"errors"
	"testing"
)

// TestAppendParts: a record appended as head and body is the same record,
// on disk and read back (after a reopen, so the CRC covers both parts), as
// the joined bytes appended whole.
func TestAppendParts(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, WithMaxRecordBytes(64))
	heads := [][]byte{[]byte("head-1:"), nil, []byte("only a head")}
	bodies := [][]byte{[]byte("body one"), []byte("only a body"), nil}
	if _, err := l.AppendParts(heads, bodies); err != nil {
		t.Fatal(err)
	}
	appendT(t, l, []byte("whole"))
	if _, err := l.AppendParts(heads[:1], nil); err == nil {
		t.Fatal("AppendParts with unequal lengths: no error")
	}
	if _, err := l.AppendParts([][]byte{bytes.Repeat([]byte("h"), 40)}, [][]byte{bytes.Repeat([]byte("b"), 40)}); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("head and body over the limit together: %v, want ErrRecordTooLarge", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir)
	defer l.Close()
	_, got := readAll(t, l, 0, 1<<20)
	want := []string{"head-1:body one", "only a body", "only a head", "whole"}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("record %d: %q, want %q", i, got[i], want[i])
		}
	}
}
