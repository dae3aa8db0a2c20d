package sink

import (
	"runtime"
	rtmetrics "runtime/metrics"
	"testing"

	"github.com/sluicehq/sluice/internal/protocol"
)

// fakeConn is a distinct protocol.Conn for each pointer; the map of
// sessions only keys on it.
type fakeConn struct {
	protocol.Conn
	_ int
}

// heapObjectsAfterGC is the heap the program's objects hold
// (/memory/classes/heap/objects:bytes) after a collection.
func heapObjectsAfterGC() int64 {
	runtime.GC()
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// TestSessionMapShrinksWhenEmpty: once every session of a flood has
// left, the sink's map of sessions holds no more than an empty one. A Go
// map keeps its grown buckets when its entries are deleted: before the
// fix, 20,000 sessions entered and left kept ~400 KB on the heap (after
// sluice hostile --mode flood, the sink held 8.5 MB more heap than at
// its start).
func TestSessionMapShrinksWhenEmpty(t *testing.T) {
	const sessions = 20000
	s := &Sink{closing: make(chan struct{})}
	// One session stays throughout: the map is in use before and after.
	leaveFirst, err := s.enter(&fakeConn{})
	if err != nil {
		t.Fatal(err)
	}
	before := heapObjectsAfterGC()
	leaves := make([]func(), 0, sessions)
	for range sessions {
		leave, err := s.enter(&fakeConn{})
		if err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, leave)
	}
	for _, leave := range leaves {
		leave()
	}
	leaves = nil
	leaveFirst()
	if len(s.conns) != 0 {
		t.Fatalf("%d sessions listed after all left", len(s.conns))
	}
	// 64 KiB: far below what 20,000 entries' buckets take (16 bytes a
	// slot, ~370 KB), far above an empty map and the GC's noise.
	grew := heapObjectsAfterGC() - before
	runtime.KeepAlive(s) // the sink lives on after its sessions
	if grew > 64<<10 {
		t.Fatalf("the heap holds %d bytes more after %d sessions entered and left, want at most 64 KiB", grew, sessions)
	}
}
