package frame

import "testing"

// The pool keeps at most MaxPooledBytes of free buffers: beyond that a
// buffer given back is left to the collector, so what the pool holds is
// bounded and known (a sync.Pool kept everything given back reachable
// until two collections passed: a fifth of the heap under a flood).
func TestPoolKeepsAtMostMaxPooledBytes(t *testing.T) {
	const n = 1 << 20
	_, size := BufClass(n)
	var bufs [][]byte
	for range 2 * MaxPooledBytes / size {
		bufs = append(bufs, GetBuf(n))
	}
	before := PooledBytes()
	for _, b := range bufs {
		PutBuf(b)
	}
	if got := PooledBytes(); got > MaxPooledBytes {
		t.Fatalf("the pool keeps %d bytes, want at most %d", got, MaxPooledBytes)
	}
	if got := PooledBytes(); got <= before {
		t.Fatalf("the pool kept nothing (%d bytes, %d before)", got, before)
	}
	b := GetBuf(n)
	if len(b) != 0 || cap(b) != size {
		t.Fatalf("GetBuf(%d) = len %d cap %d, want len 0 cap %d", n, len(b), cap(b), size)
	}
	PutBuf(make([]byte, size+1)) // not a class's size: not kept
	PutBuf(b)
}
