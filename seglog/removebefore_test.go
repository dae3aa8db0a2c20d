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

// TestRemoveBeforeReusesFileWhenCreateFails: on a disk so full that not
// even an empty segment can be created, a consumed active segment is
// still released: its own file becomes the new, empty segment at the
// offset, sealed segments before it go too, and offsets go on from there,
// also after a reopen. (Before, the segment was kept, and the disk stayed
// full of consumed records.)
func TestRemoveBeforeReusesFileWhenCreateFails(t *testing.T) {
	for _, upTo := range []uint64{300, 1000} { // the end of the log, and beyond
		dir := t.TempDir()
		fs := &faultFS{budget: -1}
		l := openT(t, dir, WithFS(fs), WithSegmentBytes(4096), quiet)
		for i := 0; i < 300; i++ {
			appendT(t, l, rec(i))
		}
		if len(segFiles(t, dir)) < 3 {
			t.Fatal("expected several segments")
		}
		fs.mu.Lock()
		fs.noCreate = true
		fs.mu.Unlock()
		if n, err := l.RemoveBefore(upTo); err != nil || n < 3 {
			t.Fatalf("RemoveBefore(%d) with no segment creatable = %d, %v", upTo, n, err)
		}
		if files := segFiles(t, dir); len(files) != 1 || files[0] != segmentName(upTo) {
			t.Fatalf("RemoveBefore(%d): segments %v", upTo, files)
		}
		if info, err := os.Stat(filepath.Join(dir, segmentName(upTo))); err != nil || info.Size() != 0 {
			t.Fatalf("RemoveBefore(%d): the new segment: %v, %v", upTo, info, err)
		}
		if l.FirstOffset() != upTo || l.NextOffset() != upTo {
			t.Fatalf("RemoveBefore(%d): first %d next %d", upTo, l.FirstOffset(), l.NextOffset())
		}
		if off := appendT(t, l, rec(int(upTo))); off != upTo {
			t.Fatalf("RemoveBefore(%d): append at %d", upTo, off)
		}
		l.Close()
		l = openT(t, dir)
		if offs, vals := readAll(t, l, upTo, 4096); len(offs) != 1 || offs[0] != upTo || string(vals[0]) != string(rec(int(upTo))) || l.NextOffset() != upTo+1 {
			t.Fatalf("RemoveBefore(%d): after reopen %v next %d", upTo, offs, l.NextOffset())
		}
		l.Close()
	}
}

// TestInterruptedRollRecovers: a crash while RemoveBefore reuses the
// consumed active segment's file leaves either the file under its old
// name (the log as it was) or the consumed records under the new name;
// Open empties the latter (not a torn tail: nothing acknowledged is
// cut), and the log goes on at the new base.
func TestInterruptedRollRecovers(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, WithSegmentBytes(64<<10))
	for i := 0; i < 100; i++ {
		appendT(t, l, rec(i))
	}
	l.Close()
	// The crash point: renamed, not yet emptied.
	if err := os.Rename(filepath.Join(dir, segmentName(0)), filepath.Join(dir, segmentName(150))); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir, quiet)
	if l.FirstOffset() != 150 || l.NextOffset() != 150 || l.Stats().TornTails != 0 {
		t.Fatalf("after the interrupted roll: first %d next %d torn tails %d", l.FirstOffset(), l.NextOffset(), l.Stats().TornTails)
	}
	if off := appendT(t, l, rec(150)); off != 150 {
		t.Fatalf("append at %d, want 150", off)
	}
	l.Close()
	l = openT(t, dir)
	defer l.Close()
	if offs, _ := readAll(t, l, 150, 4096); len(offs) != 1 || offs[0] != 150 {
		t.Fatalf("after reopen: %v", offs)
	}
}
