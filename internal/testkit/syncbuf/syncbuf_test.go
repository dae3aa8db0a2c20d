package syncbuf

import (
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentWriteAndRead: writes and reads from several goroutines
// (run under -race), and every line is there at the end.
func TestConcurrentWriteAndRead(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fmt.Fprintf(&b, "writer %d line %d\n", w, i)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := b.Lines(); n != 400 {
		t.Fatalf("%d lines, want 400", n)
	}
}
