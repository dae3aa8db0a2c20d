package seglog

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// TestLargeRecordsFromCallerMemory: records with a head or body of refMin
// bytes or more are written from the appender's memory, not copied into
// the batch; mixed with small ones, concurrent, across segment rolls, they
// read back the same before and after a reopen (the CRC covers every
// piece), and the appender may reuse its memory as soon as Append returns.
func TestLargeRecordsFromCallerMemory(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, WithSegmentBytes(300<<10), WithIndexInterval(64<<10))
	rec := func(w, i int) (head, body []byte) {
		switch i % 4 {
		case 0:
			return []byte(fmt.Sprintf("small %d/%d", w, i)), nil
		case 1:
			return bytes.Repeat([]byte{byte(w), byte(i)}, refMin/2+i), nil // large whole record
		case 2:
			return []byte(fmt.Sprintf("head %d/%d:", w, i)), bytes.Repeat([]byte{byte(i)}, refMin+7*i) // large body
		default:
			return bytes.Repeat([]byte{'h', byte(w)}, refMin/2), bytes.Repeat([]byte{byte(i)}, 2*refMin+1) // both large
		}
	}
	const writers, each = 4, 24
	offsets := make([][]uint64, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				h, b := rec(w, i)
				off, err := l.AppendParts([][]byte{h}, [][]byte{b})
				if err != nil {
					t.Error(err)
					return
				}
				clear(h) // the log must not read it after Append returns
				clear(b)
				offsets[w] = append(offsets[w], off)
			}
		}()
	}
	wg.Wait()
	check := func(l *Log, when string) {
		offs, vals := readAll(t, l, 0, 1<<30)
		byOff := map[uint64][]byte{}
		for i, o := range offs {
			byOff[o] = vals[i]
		}
		for w := range writers {
			for i, o := range offsets[w] {
				h, b := rec(w, i)
				if want := append(h, b...); !bytes.Equal(byOff[o], want) {
					t.Fatalf("%s: record %d (writer %d, #%d): %d bytes, want %d", when, o, w, i, len(byOff[o]), len(want))
				}
			}
		}
		if len(offs) != writers*each {
			t.Fatalf("%s: %d records, want %d", when, len(offs), writers*each)
		}
	}
	check(l, "before reopen")
	if len(l.segs) < 3 {
		t.Errorf("%d segments: the test should cross segment rolls", len(l.segs))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir)
	defer l.Close()
	check(l, "after reopen")
}

// TestLargeRecordsNotCopied: the batch buffers hold the frame headers and
// padding of large records, not their bytes (before: every record was
// copied into them, so they grew past the record size).
func TestLargeRecordsNotCopied(t *testing.T) {
	l := openT(t, t.TempDir())
	defer l.Close()
	rec := bytes.Repeat([]byte{7}, 256<<10)
	for range 8 {
		appendT(t, l, rec)
		if _, err := l.AppendParts([][]byte{[]byte("head")}, [][]byte{rec}); err != nil {
			t.Fatal(err)
		}
	}
	l.mu.Lock()
	held := cap(l.pending.buf) + cap(l.spare.buf)
	l.mu.Unlock()
	if held >= refMin {
		t.Errorf("batch buffers hold %d bytes: large records were copied", held)
	}
	_, vals := readAll(t, l, 0, 1<<30)
	if len(vals) != 16 || !bytes.Equal(vals[15][4:], rec) {
		t.Errorf("read back %d records", len(vals))
	}
}
