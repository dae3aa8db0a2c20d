package seglog

import (
	"fmt"
	"log/slog"
	"testing"
)

// quiet discards the log's own reports in tests that provoke them.
var quiet = WithLogger(slog.New(slog.DiscardHandler))

func openT(t testing.TB, dir string, opts ...Option) *Log {
	t.Helper()
	l, err := Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func appendT(t testing.TB, l *Log, recs ...[]byte) uint64 {
	t.Helper()
	off, err := l.Append(recs)
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// readAll returns every record from `from` to the end.
func readAll(t testing.TB, l *Log, from uint64, budget int) ([]uint64, [][]byte) {
	t.Helper()
	var offs []uint64
	var vals [][]byte
	it := l.NewIterator(from, budget)
	for it.Next() {
		offs = append(offs, it.Offset())
		vals = append(vals, append([]byte(nil), it.Value()...))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return offs, vals
}

func rec(i int) []byte { return []byte(fmt.Sprintf("record-%06d", i)) }

func TestAppendReadReopen(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, WithSegmentBytes(4096), WithIndexInterval(128))
	for i := 0; i < 1000; i++ {
		if off := appendT(t, l, rec(i)); off != uint64(i) {
			t.Fatalf("offset %d, want %d", off, i)
		}
	}
	check := func(l *Log) {
		for _, from := range []uint64{0, 1, 99, 500, 999} {
			offs, vals := readAll(t, l, from, 4096)
			if len(offs) != 1000-int(from) && len(offs) != 1001-int(from) {
				t.Fatalf("from %d: %d records", from, len(offs))
			}
			for i, o := range offs {
				if o != from+uint64(i) || (o < 1000 && string(vals[i]) != string(rec(int(o)))) {
					t.Fatalf("from %d: record %d = %d %q", from, i, o, vals[i])
				}
			}
		}
	}
	check(l)
	if len(l.segs) < 5 {
		t.Fatalf("expected several segments, got %d", len(l.segs))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir, WithSegmentBytes(4096), WithIndexInterval(128))
	check(l)
	if got := appendT(t, l, []byte("more")); got != 1000 {
		t.Fatalf("offset after reopen %d", got)
	}
	l.Close()
	l = openT(t, dir, WithSegmentBytes(4096), WithIndexInterval(128), WithTrustSealedSegments())
	defer l.Close()
	if l.NextOffset() != 1001 {
		t.Fatalf("next %d", l.NextOffset())
	}
	check(l)
}
