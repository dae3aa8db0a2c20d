package seglog

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// These tests kill scripts/mutate.sh's seglog mutants: each fails with a
// message that starts with "INVARIANT <category>:", which the script greps
// for, so a mutant counts as killed only by the guarantee it breaks.

// TestDamagedRecordIsNeverReturned flips one byte in the body of a record
// that is not the last: Open must refuse the log, and if it opened, no
// read may return the damaged bytes as the record (mutation_crcskip).
func TestDamagedRecordIsNeverReturned(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir)
	for i := range 5 {
		appendT(t, l, rec(i))
	}
	seg := l.segs[len(l.segs)-1].path
	pos := int64(frameSize(len(rec(0)))) + headerSize + 2 // record 1's body
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[pos] ^= 0x5A
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, quiet)
	if errors.Is(err, ErrCorrupt) {
		return
	}
	if err != nil {
		t.Fatalf("open: %v, want a corruption error", err)
	}
	defer l.Close()
	offs, vals := readAll(t, l, 0, 1<<20)
	for i := range offs {
		if !bytes.Equal(vals[i], rec(int(offs[i]))) {
			t.Fatalf("INVARIANT corrupted: record %d read back as %q, stored %q: a damaged record passed its checksum", offs[i], vals[i], rec(int(offs[i])))
		}
	}
	t.Fatalf("open accepted a log with a damaged record and read %d records", len(offs))
}

// TestTornTailTruncatedBeforeAppend cuts the last record short (a crash in
// its write): Open must cut the torn bytes off the file, so the next Open
// finds a clean log, and appends go where the torn record began
// (mutation_keeptorntail).
func TestTornTailTruncatedBeforeAppend(t *testing.T) {
	const n = 20
	dir := t.TempDir()
	seg, pos, size := buildLog(t, dir, n)
	if err := os.Truncate(seg, pos+size-3); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, WithSegmentBytes(4096), quiet)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if got := l.Stats().TornTails; got != 1 {
		t.Fatalf("TornTails = %d, want 1", got)
	}
	if fi, err := os.Stat(seg); err != nil || fi.Size() != pos {
		t.Fatalf("INVARIANT torn-tail: after Open the segment is %d bytes, want %d: the torn record's bytes are still there (%v)", fi.Size(), pos, err)
	}
	if off := appendT(t, l, []byte("after")); off != n-1 {
		t.Fatalf("append after recovery at %d, want %d", off, n-1)
	}
	l.Close()
	l, err = Open(dir, WithSegmentBytes(4096), quiet)
	if err != nil {
		t.Fatalf("INVARIANT torn-tail: reopen after an append: %v", err)
	}
	defer l.Close()
	if got := l.Stats().TornTails; got != 0 {
		t.Fatalf("INVARIANT torn-tail: the second Open found %d torn tails", got)
	}
	offs, _ := readAll(t, l, 0, 1<<20)
	if len(offs) != n {
		t.Fatalf("%d records after reopen, want %d", len(offs), n)
	}
}
