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

// FuzzReadAfterDamage: records of any sizes, then any bytes of the open
// log's segment overwritten (the disk changing them under it): an
// iterator started anywhere, and seeking past whatever fails, returns
// only records exactly as they were appended at their offsets, never a
// panic. It checks the iterator's step over a record whose checksum failed
// (Iterator.Next) can never make it return the wrong bytes.
func FuzzReadAfterDamage(f *testing.F) {
	f.Add([]byte{10, 200, 3, 60, 90, 1}, uint16(40), []byte{0xff}, uint8(0))
	f.Add([]byte{5, 5, 5, 5, 5, 5, 5, 5}, uint16(3), []byte{0, 0, 0, 0}, uint8(2))
	f.Add([]byte{255, 1, 255, 1}, uint16(290), []byte("x"), uint8(1))
	f.Fuzz(func(t *testing.T, sizes []byte, at uint16, patch []byte, from uint8) {
		if len(sizes) > 64 || len(patch) > 64 {
			return
		}
		dir := t.TempDir()
		l, err := Open(dir, WithMaxRecordBytes(1<<16), quiet)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var recs [][]byte
		for i, n := range sizes {
			r := make([]byte, int(n)+1)
			for j := range r {
				r[j] = byte(i*7 + j)
			}
			if _, err := l.Append([][]byte{r}); err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
		}
		if len(recs) == 0 {
			return
		}
		seg := l.segs[len(l.segs)-1]
		if sf, err := os.OpenFile(seg.path, os.O_RDWR, 0); err == nil {
			sf.WriteAt(patch, int64(at)%max(seg.size, 1))
			sf.Close()
		}
		it := l.NewIterator(uint64(from)%uint64(len(recs)), 4096)
		for want := uint64(from) % uint64(len(recs)); want < uint64(len(recs)); {
			if !it.Next() {
				if it.Err() == nil {
					t.Fatalf("iteration ended at %d of %d without an error", want, len(recs))
				}
				want++
				it.Seek(want)
				continue
			}
			if it.Offset() < want || it.Offset() >= uint64(len(recs)) || string(it.Value()) != string(recs[it.Offset()]) {
				t.Fatalf("read offset %d (%d bytes) at %d: not the record appended there", it.Offset(), len(it.Value()), want)
			}
			want = it.Offset() + 1
		}
	})
}
