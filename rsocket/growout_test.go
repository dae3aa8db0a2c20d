package rsocket

import (
	"testing"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// An output queue that grows past keepOut by small frames, as a stream
// of 16 KiB payloads makes it between two writes, is held in a pooled
// frame buffer, which wrote gives back once it is written. append grew it
// from the spare at every write round instead, into arrays of no pool
// size (about twice the bytes queued), all left to the collector.
func TestOutputQueueGrowsInPooledBuffers(t *testing.T) {
	payload := make([]byte, 16<<10)
	var out []byte
	for range 64 { // 1 MiB queued between two writes
		out = append(growOut(out, len(payload)), payload...)
		if len(out) <= keepOut {
			continue
		}
		if _, size := frame.BufClass(cap(out)); size != cap(out) {
			t.Fatalf("a queue of %d bytes is in a buffer of %d, no pool class: wrote cannot give it back", len(out), cap(out))
		}
	}
}
