package seglog

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestConcurrentAppendAndFollow: many appenders share fsyncs (group
// commit) while a reader follows the tail and sees every record once, in
// order, never a record before its Append returned... or a torn one.
func TestConcurrentAppendAndFollow(t *testing.T) {
	l := openT(t, t.TempDir(), WithSegmentBytes(16<<10))
	defer l.Close()
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				appendT(t, l, []byte(fmt.Sprintf("w%d-%d", w, i)))
			}
		}()
	}
	done := make(chan struct{})
	seen := map[string]bool{}
	go func() {
		defer close(done)
		it := l.NewIterator(0, 4096)
		next := uint64(0)
		deadline := time.After(30 * time.Second)
		for next < writers*each {
			for it.Next() {
				if it.Offset() != next {
					t.Errorf("read %d, want %d", it.Offset(), next)
					return
				}
				seen[string(it.Value())] = true
				next++
			}
			if it.Err() != nil {
				t.Error(it.Err())
				return
			}
			if next == writers*each {
				break
			}
			select {
			case <-l.Wait(next):
			case <-deadline:
				t.Errorf("reader stalled at %d", next)
				return
			}
		}
	}()
	wg.Wait()
	<-done
	if len(seen) != writers*each {
		t.Fatalf("reader saw %d distinct records", len(seen))
	}
	st := l.Stats()
	if st.Writes >= st.Appends {
		t.Logf("no group commit happened: %d writes for %d appends", st.Writes, st.Appends)
	}
	t.Logf("%d appends in %d writes, %d syncs", st.Appends, st.Writes, st.Syncs)
}

func TestRecordTooLarge(t *testing.T) {
	l := openT(t, t.TempDir(), WithMaxRecordBytes(100))
	defer l.Close()
	if _, err := l.Append([][]byte{make([]byte, 101)}); err == nil {
		t.Fatal("oversize record accepted")
	}
	appendT(t, l, make([]byte, 100))
}

func TestIntervalSync(t *testing.T) {
	l := openT(t, t.TempDir(), WithSync(SyncInterval(5*time.Millisecond)))
	appendT(t, l, rec(1))
	// The background sync runs on its own schedule: wait for it (bounded
	// generously for a loaded machine) instead of sleeping and hoping.
	for deadline := time.Now().Add(60 * time.Second); l.Stats().Syncs == 0; {
		if time.Now().After(deadline) {
			t.Fatal("background sync did not run within 60s")
		}
		time.Sleep(time.Millisecond)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
