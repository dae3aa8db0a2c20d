package seglog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// segFiles lists the segment files in dir.
func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), segSuffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestRemoveBeforeRollsConsumedActiveSegment: once every record is below
// the offset, the active segment is replaced by an empty one, so a log
// smaller than one segment frees its space; offsets go on where they were,
// also across a reopen.
func TestRemoveBeforeRollsConsumedActiveSegment(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, WithSegmentBytes(64<<10))
	for i := 0; i < 100; i++ {
		appendT(t, l, rec(i))
	}
	// Part of the active segment: nothing can go.
	if n, err := l.RemoveBefore(50); n != 0 || err != nil {
		t.Fatalf("RemoveBefore(50) = %d, %v", n, err)
	}
	if n, err := l.RemoveBefore(100); n != 1 || err != nil {
		t.Fatalf("RemoveBefore(100) = %d, %v", n, err)
	}
	if l.FirstOffset() != 100 || l.NextOffset() != 100 {
		t.Fatalf("first %d next %d, want 100 100", l.FirstOffset(), l.NextOffset())
	}
	if files := segFiles(t, dir); len(files) != 1 || files[0] != segmentName(100) {
		t.Fatalf("segments %v", files)
	}
	if info, _ := os.Stat(filepath.Join(dir, segmentName(100))); info.Size() != 0 {
		t.Fatalf("new segment holds %d bytes", info.Size())
	}
	it := l.NewIterator(99, 4096)
	if it.Next() || !errors.Is(it.Err(), ErrTruncated) {
		t.Fatalf("reading a removed offset: %v", it.Err())
	}
	if off := appendT(t, l, rec(100)); off != 100 {
		t.Fatalf("append after roll at %d", off)
	}
	// Nothing changes when called again with the same offset.
	if n, err := l.RemoveBefore(100); n != 0 || err != nil {
		t.Fatalf("second RemoveBefore(100) = %d, %v", n, err)
	}
	l.Close()
	l = openT(t, dir)
	defer l.Close()
	if offs, _ := readAll(t, l, 100, 4096); len(offs) != 1 || offs[0] != 100 || l.NextOffset() != 101 {
		t.Fatalf("after reopen: %v next %d", offs, l.NextOffset())
	}
}

// TestRemoveBeforeBeyondEnd: an offset past the end moves the log forward
// (the agent's watermark after a repair cut the log short): the next
// append gets that offset and a reopen agrees.
func TestRemoveBeforeBeyondEnd(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, WithSegmentBytes(4096))
	for i := 0; i < 300; i++ { // several segments
		appendT(t, l, rec(i))
	}
	if len(segFiles(t, dir)) < 3 {
		t.Fatal("expected several segments")
	}
	if _, err := l.RemoveBefore(1000); err != nil {
		t.Fatal(err)
	}
	if files := segFiles(t, dir); len(files) != 1 || files[0] != segmentName(1000) {
		t.Fatalf("segments %v", files)
	}
	if off := appendT(t, l, rec(1000)); off != 1000 {
		t.Fatalf("append at %d, want 1000", off)
	}
	l.Close()
	l = openT(t, dir)
	defer l.Close()
	if l.FirstOffset() != 1000 || l.NextOffset() != 1001 {
		t.Fatalf("after reopen first %d next %d", l.FirstOffset(), l.NextOffset())
	}
}

// TestRemoveBeforeKeepsActiveInUse: a reader in the middle of the active
// segment still reads it to the end after the roll; its file goes once the
// reader is done.
func TestRemoveBeforeKeepsActiveInUse(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir)
	defer l.Close()
	for i := 0; i < 10; i++ {
		appendT(t, l, rec(i))
	}
	it := l.NewIterator(0, 4096) // reads the whole segment in one chunk
	if !it.Next() {
		t.Fatal(it.Err())
	}
	if _, err := l.RemoveBefore(10); err != nil {
		t.Fatal(err)
	}
	n := 1
	for it.Next() {
		n++
	}
	if n != 10 || it.Err() != nil {
		t.Fatalf("reader got %d records after the roll, err %v", n, it.Err())
	}
	if l.FirstOffset() != 10 {
		t.Fatalf("first %d", l.FirstOffset())
	}
}
