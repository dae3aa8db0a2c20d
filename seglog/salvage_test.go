package seglog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// flipByte xors one byte of a file and returns the damaged file's bytes.
func flipByte(t testing.TB, path string, pos int64, mask byte) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[pos] ^= mask
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// frameLoc is where one record sits in a log directory.
type frameLoc struct {
	seg       string // file name
	pos, size int64
}

// locate maps every offset of an intact log to its frame.
func locate(t testing.TB, dir string) map[uint64]frameLoc {
	t.Helper()
	bases, err := listSegments(osFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	locs := map[uint64]frameLoc{}
	for _, base := range bases {
		data, err := os.ReadFile(filepath.Join(dir, segmentName(base)))
		if err != nil {
			t.Fatal(err)
		}
		for pos := 0; pos < len(data); {
			fr, err := decodeFrame(data[pos:], 1<<20)
			if err != nil {
				t.Fatalf("golden log is damaged: %v", err)
			}
			locs[fr.offset] = frameLoc{seg: segmentName(base), pos: int64(pos), size: int64(fr.size)}
			pos += fr.size
		}
	}
	return locs
}

// quarantined returns everything in dir/quarantine, concatenated.
func quarantined(t testing.TB, dir string) []byte {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(dir, "quarantine"))
	var all []byte
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, "quarantine", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// recsExcept is what buildLog wrote for offsets 0..n-1 (rec(i) at offset
// i), less the offsets lost says a repair dropped.
func recsExcept(n int, lost func(uint64) bool) map[uint64][]byte {
	want := map[uint64][]byte{}
	for i := 0; i < n; i++ {
		if !lost(uint64(i)) {
			want[uint64(i)] = rec(i)
		}
	}
	return want
}

// verifySalvage opens a repaired log and checks that it holds exactly the
// records of want (offset -> body) at their offsets, that it checks clean,
// that it reopens the same way with and without trusting sealed indexes,
// and that appends continue at wantNext.
func verifySalvage(t testing.TB, dir string, want map[uint64][]byte, wantNext uint64) {
	t.Helper()
	if rep, err := Check(dir); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("check after repair: %v %+v", err, rep)
	}
	for _, opts := range [][]Option{{quiet}, {quiet, WithTrustSealedSegments()}} {
		l := openT(t, dir, append(opts, WithSegmentBytes(4096))...)
		offs, vals := readAll(t, l, l.FirstOffset(), 4096)
		if len(offs) != len(want) {
			l.Close()
			t.Fatalf("%d records survive, want %d", len(offs), len(want))
		}
		for i, off := range offs {
			if w, ok := want[off]; !ok || !bytes.Equal(vals[i], w) {
				l.Close()
				t.Fatalf("record at offset %d = %q, want %q", off, vals[i], w)
			}
		}
		// Reading from a surviving offset (through the index) starts
		// exactly there; those next to a gap matter most.
		for off := range want {
			_, before := want[off-1]
			_, after := want[off+1]
			if off%29 != 0 && before && after {
				continue
			}
			it := l.NewIterator(off, 4096)
			if !it.Next() || it.Offset() != off {
				l.Close()
				t.Fatalf("iterator from %d: at %d, err %v", off, it.Offset(), it.Err())
			}
		}
		if next := l.NextOffset(); next != wantNext {
			l.Close()
			t.Fatalf("next offset %d, want %d", next, wantNext)
		}
		l.Close()
	}
	l := openT(t, dir, WithSegmentBytes(4096), quiet)
	defer l.Close()
	if off := appendT(t, l, []byte("after repair")); off != wantNext {
		t.Fatalf("append after repair at %d, want %d", off, wantNext)
	}
}

// TestRepairSalvagesAroundAFlip flips one byte of every record of a
// three-segment log, once in its header and once in its body: Open must
// refuse with the file and position (unless it is the final record, a torn
// tail), and Repair must keep every other record at its offset, leave the
// other segments untouched, and quarantine the damaged frame.
func TestRepairSalvagesAroundAFlip(t *testing.T) {
	const n = 300
	golden := t.TempDir()
	buildLog(t, golden, n)
	locs := locate(t, golden)
	for i := uint64(0); i < n; i++ {
		loc := locs[i]
		for _, where := range []struct {
			name string
			at   int64
		}{
			{"header", int64(i % headerSize)},
			{"body", headerSize + int64(i)%int64(len(rec(0)))},
		} {
			name := fmt.Sprintf("record %d %s", i, where.name)
			dir := copyDir(t, golden)
			path := filepath.Join(dir, loc.seg)
			damaged := flipByte(t, path, loc.pos+where.at, 0x20)
			frameBytes := damaged[loc.pos : loc.pos+loc.size]

			torn := i == n-1
			next := uint64(n)
			l, err := Open(dir, WithSegmentBytes(4096), quiet)
			if torn {
				if err != nil {
					t.Fatalf("%s: open with a torn tail: %v", name, err)
				}
				// Repair keeps the final record's offset exactly when
				// Open does: damaged after it was written whole, not torn.
				next = l.NextOffset()
				l.Close()
				dir = copyDir(t, golden)
				path = filepath.Join(dir, loc.seg)
				flipByte(t, path, loc.pos+where.at, 0x20)
			} else {
				ce, ok := IsCorrupt(err)
				if !ok || ce.File != path || ce.Pos != loc.pos || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s: open: %v, want corruption in %s at byte %d", name, err, path, loc.pos)
				}
			}
			rep, err := Repair(dir)
			if err != nil {
				t.Fatalf("%s: repair: %v", name, err)
			}
			if rep.Records != n-1 || len(rep.Problems) != 1 || rep.Quarantined < loc.size {
				t.Fatalf("%s: repair report %+v", name, rep)
			}
			if !strings.HasPrefix(rep.Summary(), fmt.Sprintf("kept %d records, quarantined %d bytes at offsets %s:%d-", n-1, rep.Quarantined, loc.seg, loc.pos)) {
				t.Fatalf("%s: summary %q", name, rep.Summary())
			}
			if q := quarantined(t, dir); !bytes.Contains(q, frameBytes) {
				t.Fatalf("%s: quarantine (%d bytes) lacks the damaged frame", name, len(q))
			}
			for _, other := range locs {
				if other.seg == loc.seg {
					continue
				}
				a, _ := os.ReadFile(filepath.Join(golden, other.seg))
				b, _ := os.ReadFile(filepath.Join(dir, other.seg))
				if !bytes.Equal(a, b) {
					t.Fatalf("%s: intact segment %s was changed", name, other.seg)
				}
			}
			want := recsExcept(n, func(j uint64) bool { return j == i })
			verifySalvage(t, dir, want, next)
		}
	}
}

// TestRepairMissingSegment: a segment file that vanished makes Open fail
// with ErrCorrupt (this was also TestMissingSegmentIsAnError in
// recovery_test.go, the same steps up to the Open); Repair makes it a gap
// and keeps the later segments.
func TestRepairMissingSegment(t *testing.T) {
	dir := t.TempDir()
	buildLog(t, dir, 300)
	bases, _ := listSegments(osFS{}, dir)
	os.Remove(filepath.Join(dir, segmentName(bases[1])))
	if _, err := Open(dir, quiet); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open with a missing segment: %v", err)
	}
	rep, err := Repair(dir)
	if err != nil || len(rep.Problems) != 1 || rep.Problems[0].Lost != bases[2]-bases[1] {
		t.Fatalf("repair: %v %+v", err, rep)
	}
	verifySalvage(t, dir, recsExcept(300, func(j uint64) bool { return j >= bases[1] && j < bases[2] }), 300)
}

// TestRepairAgain: damage to a gap frame an earlier repair wrote, and to
// the records around it, is repaired in turn without losing more.
func TestRepairAgain(t *testing.T) {
	dir := t.TempDir()
	buildLog(t, dir, 300)
	locs := locate(t, dir)
	flipByte(t, filepath.Join(dir, locs[150].seg), locs[150].pos+headerSize, 1)
	if _, err := Repair(dir); err != nil {
		t.Fatal(err)
	}
	// The gap frame sits where record 150 was, in the rewritten segment.
	seg := filepath.Join(dir, locs[150].seg)
	data, _ := os.ReadFile(seg)
	fr, err := decodeFrame(data[locs[150].pos:], 1<<20)
	if err != nil || fr.gap != 1 || fr.offset != 150 {
		t.Fatalf("gap frame: %+v %v", fr, err)
	}
	flipByte(t, seg, locs[150].pos+headerSize, 1)
	rep, err := Repair(dir)
	if err != nil || rep.Records != 299 {
		t.Fatalf("second repair: %v %+v", err, rep)
	}
	verifySalvage(t, dir, recsExcept(300, func(j uint64) bool { return j == 150 }), 300)
	if n := len(quarantined(t, dir)); n < int(locs[150].size)+32 {
		t.Fatalf("quarantine holds %d bytes: the first repair's file was overwritten?", n)
	}
}

// TestRepairRandomFlips is the property: in a log of records of random
// sizes, one random flipped byte anywhere loses at most the record whose
// frame holds it, never panics, and the repaired log opens, reads and
// appends.
func TestRepairRandomFlips(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	const n = 120
	golden := t.TempDir()
	l := openT(t, golden, WithSegmentBytes(4096))
	bodies := map[uint64][]byte{}
	for i := 0; i < n; i++ {
		b := make([]byte, rng.Intn(300))
		rng.Read(b)
		bodies[appendT(t, l, b)] = b
	}
	l.Close()
	locs := locate(t, golden)
	bases, _ := listSegments(osFS{}, golden)
	for iter := 0; iter < 200; iter++ {
		dir := copyDir(t, golden)
		base := bases[rng.Intn(len(bases))]
		path := filepath.Join(dir, segmentName(base))
		st, _ := os.Stat(path)
		pos := rng.Int63n(st.Size())
		flipByte(t, path, pos, byte(1+rng.Intn(255)))
		var hit uint64
		for off, loc := range locs {
			if loc.seg == segmentName(base) && pos >= loc.pos && pos < loc.pos+loc.size {
				hit = off
			}
		}
		next := uint64(n)
		if hit == n-1 {
			// The final record: Repair keeps its offset exactly when Open
			// does (damaged after it was written whole, not torn).
			probe := copyDir(t, dir)
			l, err := Open(probe, WithSegmentBytes(4096), quiet)
			if err != nil {
				t.Fatalf("flip at %s:%d of the final record: open: %v", path, pos, err)
			}
			next = l.NextOffset()
			l.Close()
		}
		rep, err := Repair(dir)
		if err != nil {
			t.Fatalf("flip at %s:%d: repair: %v", path, pos, err)
		}
		want := map[uint64][]byte{}
		for off, b := range bodies {
			if off != hit {
				want[off] = b
			}
		}
		// A flip in the zero padding leaves the body intact but still
		// fails the frame, so the record is lost either way.
		if rep.Records != n-1 {
			t.Fatalf("flip at %s:%d (record %d): %d records kept: %+v", path, pos, hit, rep.Records, rep.Problems)
		}
		verifySalvage(t, dir, want, next)
	}
}

// memFile is an in-memory segment for the fuzz target.
type memFile struct{ b []byte }

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
func (m *memFile) WriteAt(p []byte, off int64) (int, error) { return 0, errors.ErrUnsupported }
func (m *memFile) Close() error                             { return nil }
func (m *memFile) Truncate(int64) error                     { return errors.ErrUnsupported }
func (m *memFile) Datasync() error                          { return nil }
func (m *memFile) Size() (int64, error)                     { return int64(len(m.b)), nil }
func (m *memFile) Name() string                             { return "mem" }

// FuzzSalvage: for any segment bytes, salvage never panics, its spans cover
// the input in order, and the rebuilt segment verifies completely, holds
// every record salvage counted, and ends where the next segment begins.
func FuzzSalvage(f *testing.F) {
	var good []byte
	for i := uint64(0); i < 6; i++ {
		good = appendRecord(good, 10+i, bytes.Repeat([]byte{byte('a' + i)}, int(i*7)))
	}
	f.Add(good, uint64(10), uint16(6), true)
	f.Add(good, uint64(10), uint16(0), false)
	bad := append([]byte{}, good...)
	bad[50] ^= 0xFF
	f.Add(bad, uint64(10), uint16(6), true)
	f.Add(bad, uint64(10), uint16(9), true)
	f.Add(appendGap(appendRecord(nil, 3, []byte("x")), 4, 5), uint64(3), uint16(6), true)
	f.Fuzz(func(t *testing.T, data []byte, base uint64, span16 uint16, bounded bool) {
		limit := base + uint64(span16)
		if limit < base {
			return
		}
		spans := salvage(data, base, limit, bounded, 1<<16)
		pos, off, records := int64(0), base, 0
		for _, s := range spans {
			if s.pos != pos || s.end < s.pos || s.first != off || s.next < s.first {
				t.Fatalf("spans do not line up: %+v", spans)
			}
			pos, off = s.end, s.next
			records += s.records
		}
		if pos != int64(len(data)) || (bounded && off != limit) {
			t.Fatalf("spans end at byte %d, offset %d: %+v", pos, off, spans)
		}
		out := rebuild(data, spans, !bounded)
		r, err := scanSegment(&memFile{out}, base, 1<<16, 4096)
		if err != nil || r.bad != nil || r.size != int64(len(out)) || r.records != records {
			t.Fatalf("rebuilt segment: %v %v, %d of %d bytes, %d records, want %d", err, r.bad, r.size, len(out), r.records, records)
		}
		if bounded && r.next != limit {
			t.Fatalf("rebuilt segment ends at %d, next starts at %d", r.next, limit)
		}
	})
}

// TestRepairDamageThenTornTail: in the last segment, a damaged record
// followed by intact ones and then a torn write keeps the intact ones.
func TestRepairDamageThenTornTail(t *testing.T) {
	dir := t.TempDir()
	buildLog(t, dir, 300)
	locs := locate(t, dir)
	last := locs[299]
	path := filepath.Join(dir, last.seg)
	flipByte(t, path, locs[297].pos+headerSize, 1)
	if err := os.Truncate(path, last.pos+last.size-3); err != nil {
		t.Fatal(err)
	}
	rep, err := Repair(dir)
	if err != nil || rep.Records != 298 || len(rep.Problems) != 2 || !rep.Problems[1].Torn {
		t.Fatalf("repair: %v %+v", err, rep)
	}
	verifySalvage(t, dir, recsExcept(299, func(j uint64) bool { return j == 297 }), 299)
}

// TestOpenRemovesRepairLeftover: a Repair that died before renaming its
// rewritten segment leaves NAME.seg.tmp; Open removes it and uses the
// segment as it is.
func TestOpenRemovesRepairLeftover(t *testing.T) {
	dir := t.TempDir()
	buildLog(t, dir, 10)
	tmp := filepath.Join(dir, segmentName(0)+".tmp")
	os.WriteFile(tmp, []byte("half a rewrite"), 0o644)
	l := openT(t, dir, quiet)
	defer l.Close()
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover still there: %v", err)
	}
	if offs, _ := readAll(t, l, 0, 4096); len(offs) != 10 {
		t.Fatalf("%d records", len(offs))
	}
}

// TestCheckLiveLog: Check needs no lock and may run while records are
// appended and old segments removed: it never fails and never reports
// damage that is not there (at most an append in progress as a torn tail).
func TestCheckLiveLog(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, WithSegmentBytes(4096), WithSync(SyncNone()))
	defer l.Close()
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := l.Append([][]byte{rec(i), rec(i + 1)}); err != nil {
				done <- err
				return
			}
			// Keep the last 150 records (never a watermark beyond the end:
			// RemoveBefore would move the log forward to it).
			if n := l.NextOffset(); i%50 == 0 && n > 150 {
				if _, err := l.RemoveBefore(n - 150); err != nil {
					done <- err
					return
				}
			}
		}
	}()
	for i := 0; i < 100; i++ {
		rep, err := Check(dir)
		if err != nil {
			t.Fatalf("check %d of a live log: %v", i, err)
		}
		for _, p := range rep.Problems {
			if !p.Torn {
				t.Fatalf("check %d of a live log: %v", i, p)
			}
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestCheckKeepsRecordsAboveTheDefaultLimit: a log written with a larger
// record limit than Check's default checks clean, so Repair never
// quarantines an intact large record.
func TestCheckKeepsRecordsAboveTheDefaultLimit(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, WithMaxRecordBytes(40<<20), WithSync(SyncNone()))
	big := bytes.Repeat([]byte{7}, 33<<20)
	appendT(t, l, rec(0), big, rec(2))
	l.Close()
	rep, err := Repair(dir)
	if err != nil || len(rep.Problems) != 0 || rep.Records != 3 {
		t.Fatalf("repair of an intact log with a 33 MiB record: %v %+v", err, rep)
	}
}

// TestCheckVisitor: Check and Repair hand every intact record to
// WithCheckVisitor, in offset order, and none of a damaged one
// (`sluice log check` counts the records inside messages with it).
func TestCheckVisitor(t *testing.T) {
	const n = 300
	dir := t.TempDir()
	buildLog(t, dir, n)
	loc := locate(t, dir)[100]
	flipByte(t, filepath.Join(dir, loc.seg), loc.pos+headerSize, 0x20)
	for _, f := range []func(string, ...Option) (*Report, error){Check, Repair} {
		var offs []uint64
		rep, err := f(dir, WithCheckVisitor(func(off uint64, body []byte) {
			if string(body) != string(rec(int(off))) {
				t.Errorf("offset %d: body %q, want %q", off, body, rec(int(off)))
			}
			offs = append(offs, off)
		}))
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(offs)) != rep.Records || len(offs) != n-1 {
			t.Fatalf("visited %d records, report %d, want %d", len(offs), rep.Records, n-1)
		}
		for i, off := range offs {
			want := uint64(i)
			if i >= 100 {
				want++
			}
			if off != want {
				t.Fatalf("visit %d: offset %d, want %d", i, off, want)
			}
		}
	}
}
