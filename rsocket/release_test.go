package rsocket

import (
	"testing"
	"unsafe"
)

// TestStreamReleaseReusesBuffers: a consumer that gives each payload back
// (Stream.Release) gets its later payloads in the buffers it gave back
// instead of one new allocation each, and every element still arrives
// whole and intact (a buffer reused too early would show an element
// overwritten by a later one). 200 elements of 64 KiB under a 256 KiB
// byte-credit window: before Release, 200 distinct buffers.
func TestStreamReleaseReusesBuffers(t *testing.T) {
	const count, size, window = 200, 64 << 10, 256 << 10
	b := &bigStreamer{count: count, size: size, done: make(chan struct{})}
	c := bytePair(t, b, []Option{WithByteCredits(window)}, []Option{WithByteCredits(1 << 20)})
	s, err := c.RequestStream(tctx(t), Payload{Data: []byte("go")}, count)
	if err != nil {
		t.Fatal(err)
	}
	buffers := map[*byte]bool{}
	for i := 0; i < count; i++ {
		p, err := s.Next()
		if err != nil {
			t.Fatalf("element %d: %v", i, err)
		}
		if len(p.Data) != size {
			t.Fatalf("element %d: %d bytes, want %d", i, len(p.Data), size)
		}
		for j, x := range p.Data {
			if x != byte(i) {
				t.Fatalf("element %d: byte %d is %d (of element %d?)", i, j, x, x)
			}
		}
		buffers[unsafe.SliceData(p.Data)] = true
		s.Release(p)
	}
	// The window holds 4 elements; the spares kept are bounded by 1 MiB
	// (16 elements): far fewer buffers than elements.
	if n := len(buffers); n > 2*(window/size+minSpareBytes/size) {
		t.Fatalf("%d elements arrived in %d distinct buffers: released buffers are not reused", count, n)
	}
	t.Logf("%d elements in %d buffers", count, len(buffers))
}

// TestStreamReleaseSmallPayloads: payloads below minRecycled are copied
// from the connection's shared slab, which must never be reused for
// another payload; releasing them changes nothing.
func TestStreamReleaseSmallPayloads(t *testing.T) {
	const count, size = 100, 300
	b := &bigStreamer{count: count, size: size, done: make(chan struct{})}
	c := bytePair(t, b, nil, nil)
	s, err := c.RequestStream(tctx(t), Payload{Data: []byte("go")}, count)
	if err != nil {
		t.Fatal(err)
	}
	var kept []Payload
	for i := 0; i < count; i++ {
		p, err := s.Next()
		if err != nil {
			t.Fatalf("element %d: %v", i, err)
		}
		s.Release(p)
		kept = append(kept, p)
	}
	for i, p := range kept {
		if len(p.Data) != size || p.Data[0] != byte(i) || p.Data[size-1] != byte(i) {
			t.Fatalf("element %d changed after later elements arrived: starts %d", i, p.Data[0])
		}
	}
}
