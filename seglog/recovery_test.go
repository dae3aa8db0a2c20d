package seglog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func isTruncated(err error) bool { return errors.Is(err, ErrTruncated) }

// buildLog writes n records into small segments and returns the path and
// frame position of the last record.
func buildLog(t *testing.T, dir string, n int) (lastSeg string, lastPos, lastSize int64) {
	t.Helper()
	l := openT(t, dir, WithSegmentBytes(4096))
	for i := 0; i < n; i++ {
		appendT(t, l, rec(i))
	}
	s := l.segs[len(l.segs)-1]
	lastSeg, lastSize = s.path, int64(frameSize(len(rec(n-1))))
	lastPos = s.size - lastSize
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
	}
	return dst
}

// TestTornWrite truncates the last record at every position, and flips
// every byte of it: Open must keep every earlier record, report the tail,
// and accept appends after it.
func TestTornWrite(t *testing.T) {
	const n = 300
	golden := t.TempDir()
	seg, pos, size := buildLog(t, golden, n)
	segName := filepath.Base(seg)
	goldenSeg, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	damage := map[string]func(path string, p int64){
		"truncate": func(path string, p int64) { os.Truncate(path, p) },
		"flip": func(path string, p int64) {
			f, _ := os.OpenFile(path, os.O_RDWR, 0)
			b := make([]byte, 1)
			f.ReadAt(b, p)
			b[0] ^= 0x5A
			f.WriteAt(b, p)
			f.Close()
		},
		"zero-extend": func(path string, p int64) { os.Truncate(path, p); os.Truncate(path, pos+size+4096) },
	}
	for name, hurt := range damage {
		for p := pos; p < pos+size; p++ {
			if name == "truncate" && p == pos {
				continue // a clean cut between records is not a torn write
			}
			if name == "zero-extend" && p >= pos+headerSize+int64(len(rec(n-1))) {
				continue // zeroing zero padding leaves the record intact
			}
			dir := copyDir(t, golden)
			hurt(filepath.Join(dir, segName), p)
			l, err := Open(dir, WithSegmentBytes(4096), quiet)
			if err != nil {
				t.Fatalf("%s at %d: open: %v", name, p, err)
			}
			st := l.Stats()
			// A flipped byte of a record written whole is damage, not
			// a torn write (damagedTail), unless it is in the length
			// field and makes the record run past the file's end:
			// quarantined, byte for byte.
			if name == "flip" && p >= pos+4 {
				if st.DamagedTails != 1 || st.TornTails != 0 {
					t.Fatalf("%s at %d: DamagedTails = %d, TornTails = %d, want 1 and 0", name, p, st.DamagedTails, st.TornTails)
				}
				q, err := os.ReadFile(filepath.Join(dir, "quarantine", fmt.Sprintf("%s.%d.broken", segName, pos)))
				want := slices.Clone(goldenSeg[pos : pos+size])
				want[p-pos] ^= 0x5A
				if err != nil || string(q) != string(want) {
					t.Fatalf("%s at %d: the quarantine holds %d bytes, not the damaged record's %d (%v)", name, p, len(q), size, err)
				}
			} else if st.TornTails+st.DamagedTails != 1 || name != "flip" && st.TornTails != 1 {
				t.Fatalf("%s at %d: TornTails = %d, DamagedTails = %d", name, p, st.TornTails, st.DamagedTails)
			}
			offs, vals := readAll(t, l, 0, 4096)
			if len(offs) != n-1 {
				t.Fatalf("%s at %d: %d records survive, want %d", name, p, len(offs), n-1)
			}
			for i := range offs {
				if string(vals[i]) != string(rec(i)) {
					t.Fatalf("%s at %d: record %d = %q", name, p, i, vals[i])
				}
			}
			// A torn record was never acknowledged: its offset is free
			// again. A damaged one's stays taken (a gap).
			want := uint64(n - 1)
			if st.DamagedTails == 1 {
				want = n
			}
			if off := appendT(t, l, []byte("after")); off != want {
				t.Fatalf("%s at %d: append after recovery at %d, want %d", name, p, off, want)
			}
			l.Close()
		}
	}
}

// TestCorruptionIsAnError damages a record that is not the last one: Open
// must refuse with the file and position, Check must report it, and Repair
// must keep every record but the damaged one, at its offset.
func TestCorruptionIsAnError(t *testing.T) {
	const n = 300
	golden := t.TempDir()
	buildLog(t, golden, n)
	bases, _ := listSegments(osFS{}, golden)
	for _, tc := range []struct {
		name    string
		segment int    // index into bases
		pos     int64  // byte to flip
		lost    uint64 // the record that holds it
	}{
		{"first segment, first record", 0, 10, 0},
		{"first segment, later record", 0, 3*int64(frameSize(len(rec(0)))) + 9, 3},
		{"middle segment", 1, 0, bases[1]},
		{"last segment, not the last record", len(bases) - 1, 40, bases[len(bases)-1] + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, golden)
			path := filepath.Join(dir, segmentName(bases[tc.segment]))
			f, _ := os.OpenFile(path, os.O_RDWR, 0)
			b := make([]byte, 1)
			f.ReadAt(b, tc.pos)
			b[0] ^= 0xFF
			f.WriteAt(b, tc.pos)
			f.Close()

			_, err := Open(dir, WithSegmentBytes(4096))
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.File != path || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open: %v, want corruption in %s", err, path)
			}
			rep, err := Check(dir)
			if err != nil || len(rep.Problems) == 0 || rep.Problems[0].File != path || rep.Problems[0].Torn {
				t.Fatalf("check: %+v %v", rep, err)
			}
			rep, err = Repair(dir)
			if err != nil || len(rep.Recovered) == 0 {
				t.Fatalf("repair: %+v %v", rep, err)
			}
			if q, _ := os.ReadDir(filepath.Join(dir, "quarantine")); len(q) == 0 {
				t.Fatal("nothing quarantined")
			}
			verifySalvage(t, dir, recsExcept(n, func(i uint64) bool { return i == tc.lost }), n)
		})
	}
}

func TestIndexRebuiltWhenDamaged(t *testing.T) {
	dir := t.TempDir()
	buildLog(t, dir, 300)
	bases, _ := listSegments(osFS{}, dir)
	os.WriteFile(filepath.Join(dir, indexName(bases[0])), []byte("garbage"), 0o644)
	os.Remove(filepath.Join(dir, indexName(bases[1])))
	l := openT(t, dir, WithTrustSealedSegments())
	defer l.Close()
	if offs, _ := readAll(t, l, 0, 4096); len(offs) != 300 {
		t.Fatalf("%d records", len(offs))
	}
}

func TestMeta(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadMeta(dir, "m"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	for _, v := range []string{"one", "", "three"} {
		if err := WriteMeta(dir, "m", []byte(v)); err != nil {
			t.Fatal(err)
		}
		got, err := ReadMeta(dir, "m")
		if err != nil || string(got) != v {
			t.Fatalf("got %q %v", got, err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "m"))
	b[len(b)-1] ^= 1
	os.WriteFile(filepath.Join(dir, "m"), b, 0o644)
	if _, err := ReadMeta(dir, "m"); !errors.Is(err, ErrMetaCorrupt) {
		t.Fatalf("corrupt: %v", err)
	}
}

// TestReopenRecordsLargerThanScanBuffer: records larger than Open's 1 MiB
// scan buffer, first in their segment and after others, read back after
// a reopen. Open used to refill its buffer once per record from a read
// that could not know the record's size, and took the first such record
// for corruption in the middle of the data (found by the RSocket resume
// journal, whose images are megabytes).
func TestReopenRecordsLargerThanScanBuffer(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, WithSegmentBytes(16<<20))
	var want [][]byte
	for i := range 12 {
		n := 100
		if i%3 != 1 {
			n = 1<<20 + 4096*i
		}
		r := make([]byte, n)
		for j := range r {
			r[j] = byte(i + j)
		}
		appendT(t, l, r)
		want = append(want, r)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir)
	defer l.Close()
	it := l.NewIterator(0, 1<<20)
	i := 0
	for ; it.Next(); i++ {
		if string(it.Value()) != string(want[i]) {
			t.Fatalf("record %d differs after reopening", i)
		}
	}
	if it.Err() != nil || i != len(want) {
		t.Fatalf("read %d of %d records: %v", i, len(want), it.Err())
	}
}

// TestDamagedLengthDoesNotAllocateRecordLimit: a final record whose
// length field was damaged to claim 30 MiB, in a segment of a few
// hundred bytes, is a torn tail: Open truncates it without allocating
// what the length claims (its reads are bounded by the file's size).
func TestDamagedLengthDoesNotAllocateRecordLimit(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir)
	for i := range 10 {
		appendT(t, l, rec(i))
	}
	s := l.segs[len(l.segs)-1]
	path, last := s.path, s.size-int64(frameSize(len(rec(9))))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var claim [4]byte
	binary.LittleEndian.PutUint32(claim[:], 30<<20)
	if _, err := f.WriteAt(claim[:], last); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l, err = Open(dir, WithMaxRecordBytes(MaxRecordLimit))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.NextOffset(); got != 9 {
		t.Fatalf("next offset %d after the torn record, want 9", got)
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > 8<<20 {
		t.Fatalf("Open allocated %d bytes for a record claiming 30 MiB in a %d-byte file", a, s.size)
	}
}

// TestDamagedTailOnFullDisk: a final record damaged after it was written
// whole is quarantined before it is cut off; when the quarantine cannot
// be written (a full disk), Open still succeeds, counts it and says the
// bytes were not kept: the log never wedges on the copy.
func TestDamagedTailOnFullDisk(t *testing.T) {
	const n = 20
	dir := t.TempDir()
	seg, pos, size := buildLog(t, dir, n)
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	f.ReadAt(b, pos+size-10)
	b[0] ^= 0xFF
	f.WriteAt(b, pos+size-10)
	f.Close()
	fs := &faultFS{budget: 0}
	var logged strings.Builder
	l, err := Open(dir, WithSegmentBytes(4096), WithFS(fs), WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	if err != nil {
		t.Fatalf("open with the quarantine's disk full: %v", err)
	}
	if st := l.Stats(); st.DamagedTails != 1 || st.TornTails != 0 || st.DamagedBytes != uint64(size) {
		t.Fatalf("DamagedTails %d (%d bytes), TornTails %d; want 1 (%d bytes), 0", st.DamagedTails, st.DamagedBytes, st.TornTails, size)
	}
	if !strings.Contains(logged.String(), "level=ERROR") || !strings.Contains(logged.String(), "not kept") {
		t.Errorf("log does not say the damaged record's bytes were not kept:\n%s", logged.String())
	}
	if offs, _ := readAll(t, l, 0, 4096); len(offs) != n-1 {
		t.Fatalf("%d records survive, want %d", len(offs), n-1)
	}
	fs.set(-1, false)
	if off := appendT(t, l, []byte("after")); off != n-1 {
		t.Fatalf("append after recovery at %d, want %d", off, n-1)
	}
	l.Close()
}

// TestCheckTellsDamagedFromTorn: Check calls a final record with a flipped
// byte damaged (Open quarantines it) and one cut short or followed by
// zeros torn, as Open does.
func TestCheckTellsDamagedFromTorn(t *testing.T) {
	const n = 20
	golden := t.TempDir()
	seg, pos, size := buildLog(t, golden, n)
	for name, tc := range map[string]struct {
		hurt    func(path string)
		damaged bool
	}{
		"flip": {func(path string) {
			f, _ := os.OpenFile(path, os.O_RDWR, 0)
			f.WriteAt([]byte{'!'}, pos+headerSize+1)
			f.Close()
		}, true},
		"cut":         {func(path string) { os.Truncate(path, pos+size-3) }, false},
		"zero-extend": {func(path string) { os.Truncate(path, pos+headerSize+2); os.Truncate(path, pos+size+4096) }, false},
	} {
		dir := copyDir(t, golden)
		tc.hurt(filepath.Join(dir, filepath.Base(seg)))
		rep, err := Check(dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(rep.Problems) != 1 || !rep.Problems[0].Torn || rep.Problems[0].Damaged != tc.damaged {
			t.Fatalf("%s: problems %v, want one final record, damaged %v", name, rep.Problems, tc.damaged)
		}
	}
}

// TestDamagedTailQuarantined: a byte of the final record flipped after it
// was written whole (it may have been acknowledged): Open keeps the
// record's bytes in the quarantine before it cuts them off, and counts it
// as damage, not as a torn write (mutation_damagedastorn).
func TestDamagedTailQuarantined(t *testing.T) {
	dir := t.TempDir()
	seg, pos, want := damageFinalRecord(t, dir)
	size := len(want)
	l, err := Open(dir, WithSegmentBytes(4096), quiet)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer l.Close()
	q, err := os.ReadFile(filepath.Join(dir, "quarantine", fmt.Sprintf("%s.%d.broken", filepath.Base(seg), pos)))
	if st := l.Stats(); err != nil || string(q) != string(want) || st.DamagedTails != 1 || st.TornTails != 0 {
		t.Fatalf("INVARIANT quarantined: the damaged final record's %d bytes are not in the quarantine (%d bytes there, %v); damaged tails %d, torn %d",
			size, len(q), err, st.DamagedTails, st.TornTails)
	}
}

// TestDamagedTailKeepsItsOffset: the offset of a final record damaged
// after it was written whole stays taken once Open quarantines it: a gap
// holds it, and the next record takes the offset after it. The record
// may have been handed out (an agent's message id a sink holds, a store
// offset a consumer group has passed); before, the next append reused
// it, and a sink dropped the new message as a duplicate of the lost one,
// a consumer group skipped the new record.
func TestDamagedTailKeepsItsOffset(t *testing.T) {
	dir := t.TempDir()
	damageFinalRecord(t, dir) // records 0 to 19, 19 damaged
	l, err := Open(dir, WithSegmentBytes(4096), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if next := l.NextOffset(); next != 20 {
		t.Fatalf("INVARIANT offset-reused: after the damaged record 19 was quarantined the log's next offset is %d, want 20", next)
	}
	first, err := l.Append([][]byte{[]byte("after the damage")})
	if err != nil || first != 20 {
		t.Fatalf("INVARIANT offset-reused: the next record took offset %d (%v), want 20", first, err)
	}
	l.Close()
	l, err = Open(dir, WithSegmentBytes(4096), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if st := l.Stats(); st.DamagedTails != 0 || st.TornTails != 0 || l.NextOffset() != 21 {
		t.Fatalf("reopened: damaged tails %d, torn %d, next %d; want 0, 0, 21", st.DamagedTails, st.TornTails, l.NextOffset())
	}
	it := l.NewIterator(0, 1<<20)
	var got []uint64
	for it.Next() {
		got = append(got, it.Offset())
	}
	if it.Err() != nil || len(got) != 20 || got[18] != 18 || got[19] != 20 {
		t.Fatalf("read back: offsets %v, %v; want 0 to 18 and 20", got, it.Err())
	}
}

// TestReadPastDamagedRecord: a record damaged after Open (the disk
// changed it under the log) fails the read that reaches it, every time;
// a reader that then asks for the records after it gets them, though the
// damaged record lies between them and the index entry they start from
// (before: each of them failed too, up to the next index entry, 4 KiB of
// records on).
func TestReadPastDamagedRecord(t *testing.T) {
	const n = 50
	dir := t.TempDir()
	l := openT(t, dir)
	defer l.Close()
	var pos int64
	for i := range n {
		if i == 10 {
			pos = l.segs[len(l.segs)-1].size + headerSize + 2 // record 10's body
		}
		appendT(t, l, rec(i))
	}
	f, err := os.OpenFile(l.segs[len(l.segs)-1].path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	f.ReadAt(b, pos)
	b[0] ^= 0x5A
	f.WriteAt(b, pos)
	f.Close()

	it := l.NewIterator(5, 1<<20)
	for want := uint64(5); want < 10; want++ {
		if !it.Next() || it.Offset() != want {
			t.Fatalf("record %d: %v", want, it.Err())
		}
	}
	if it.Next() || !errors.Is(it.Err(), ErrCorrupt) {
		t.Fatalf("the damaged record 10 read as %d %q (err %v), want a corruption error", it.Offset(), it.Value(), it.Err())
	}
	for _, from := range []uint64{11, 12, 30} {
		it.Seek(from)
		for want := from; want < n; want++ {
			if !it.Next() || it.Offset() != want || !bytes.Equal(it.Value(), rec(int(want))) {
				t.Fatalf("from %d: record %d: got %d %q, %v", from, want, it.Offset(), it.Value(), it.Err())
			}
		}
	}
	it.Seek(10)
	if it.Next() {
		t.Fatalf("record 10 read back as %q after a seek", it.Value())
	}
}

// TestDamagedTailQuarantinedOnce: an Open that crashed after it copied a
// damaged final record to the quarantine and before it cut the record
// off leaves the same copy for the next Open, which keeps it rather than
// writing a second (before: NAME.broken and NAME.broken.1, the same
// bytes); a quarantine file of that name holding other bytes (an earlier
// damage at the same place) is never overwritten.
func TestDamagedTailQuarantinedOnce(t *testing.T) {
	for _, earlier := range []string{"same copy", "other bytes"} {
		t.Run(earlier, func(t *testing.T) {
			dir := t.TempDir()
			seg, pos, want := damageFinalRecord(t, dir)
			qdir := filepath.Join(dir, "quarantine")
			name := fmt.Sprintf("%s.%d.broken", filepath.Base(seg), pos)
			prior := want
			if earlier == "other bytes" {
				prior = []byte("an earlier damage")
			}
			if err := os.MkdirAll(qdir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(qdir, name), prior, 0o644); err != nil {
				t.Fatal(err)
			}
			l, err := Open(dir, WithSegmentBytes(4096), quiet)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer l.Close()
			files, _ := os.ReadDir(qdir)
			var names []string
			for _, e := range files {
				names = append(names, e.Name())
			}
			wantFiles := []string{name}
			if earlier == "other bytes" {
				wantFiles = []string{name, name + ".1"}
			}
			if !slices.Equal(names, wantFiles) {
				t.Fatalf("quarantine holds %v, want %v", names, wantFiles)
			}
			got, _ := os.ReadFile(filepath.Join(qdir, wantFiles[len(wantFiles)-1]))
			first, _ := os.ReadFile(filepath.Join(qdir, name))
			if string(got) != string(want) || string(first) != string(prior) {
				t.Fatalf("quarantine contents changed or lost: %q / %q", first, got)
			}
		})
	}
}

// damageFinalRecord builds a log of 20 records in dir and flips a byte of
// the final record's body, as a disk may after it was written whole; it
// returns the segment, the record's position and its damaged bytes.
func damageFinalRecord(t *testing.T, dir string) (seg string, pos int64, damaged []byte) {
	t.Helper()
	seg, pos, size := buildLog(t, dir, 20)
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	damaged = slices.Clone(data[pos : pos+size])
	damaged[headerSize+2] ^= 0x01
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(damaged[headerSize+2:headerSize+3], pos+headerSize+2); err != nil {
		t.Fatal(err)
	}
	return seg, pos, damaged
}
