package seglog

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpenSegment: any bytes as a segment file (and any bytes as its
// index) give a clean error or a log whose records all verify, never a
// panic.
func FuzzOpenSegment(f *testing.F) {
	two := appendRecord(appendRecord(nil, 0, []byte("first")), 1, []byte("second"))
	f.Add(two, []byte(nil))
	f.Add(two[:len(two)-3], []byte("SLIX"))
	f.Add(append(append([]byte{}, two...), make([]byte, 64)...), []byte(nil))
	// A gap frame from Repair between two records.
	f.Add(appendRecord(appendGap(appendRecord(nil, 0, []byte("first")), 1, 3), 4, []byte("after")), []byte(nil))
	f.Fuzz(func(t *testing.T, seg, idx []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, segmentName(0)), seg, 0o644)
		os.WriteFile(filepath.Join(dir, indexName(0)), idx, 0o644)
		l, err := Open(dir, WithMaxRecordBytes(1<<16), WithTrustSealedSegments(), quiet)
		if err != nil {
			return
		}
		defer l.Close()
		// Every offset below NextOffset is a record or inside a gap
		// frame; records come in increasing order.
		it := l.NewIterator(0, 4096)
		n, next := uint64(0), uint64(0)
		for it.Next() {
			if it.Offset() < next || it.Offset() >= l.NextOffset() {
				t.Fatalf("record at offset %d after %d, next offset %d", it.Offset(), next, l.NextOffset())
			}
			n, next = n+1, it.Offset()+1
		}
		if it.Err() != nil || n > l.NextOffset() {
			t.Fatalf("opened log reads %d records below %d: %v", n, l.NextOffset(), it.Err())
		}
		if _, err := l.Append([][]byte{[]byte("more")}); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzReadMeta: a damaged metadata file is an error, never a panic.
func FuzzReadMeta(f *testing.F) {
	dir := f.TempDir()
	WriteMeta(dir, "m", []byte("agent-id"))
	good, _ := os.ReadFile(filepath.Join(dir, "m"))
	f.Add(good)
	f.Add(good[:5])
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "m"), b, 0o644)
		ReadMeta(dir, "m")
	})
}
