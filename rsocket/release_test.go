package rsocket

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"unsafe"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// TestStreamReleaseReusesBuffers: a consumer that gives each payload back
// (Stream.Release) gets its later payloads in the buffers it gave back
// instead of one new allocation each, and every element still arrives
// whole and intact (a buffer reused too early would show an element
// overwritten by a later one). 200 elements of 64 KiB under a 256 KiB
// byte-credit window: before Release, 200 distinct buffers.
//
// Buffers given back go to the process's frame buffer pool, which keeps at
// most frame.MaxPooledBytes: earlier tests' connections can leave it full,
// and then every buffer given back here is dropped (once in CI: 51 buffers
// for 200 elements). The pool is emptied first, so what is counted is
// Release's reuse, not what ran before.
func TestStreamReleaseReusesBuffers(t *testing.T) {
	const count, size, window = 200, 64 << 10, 256 << 10
	emptyBufPool()
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

// TestStreamReleaseHeldPayloadsIntact: payloads the application still
// holds are never reused, whether they were copied into recycled buffers
// (40 KiB, read from the reader's shared buffer) or handed over in their
// frame's own buffer (256 KiB, larger than that buffer): the consumer
// keeps the last 8 elements and releases each only after 8 more arrived,
// checking it whole first.
func TestStreamReleaseHeldPayloadsIntact(t *testing.T) {
	for _, size := range []int{40 << 10, 256 << 10} {
		const count, held = 100, 8
		b := &bigStreamer{count: count, size: size, done: make(chan struct{})}
		c := bytePair(t, b, []Option{WithByteCredits(1 << 20)}, []Option{WithByteCredits(1 << 20)})
		s, err := c.RequestStream(tctx(t), Payload{Data: []byte("go")}, count)
		if err != nil {
			t.Fatal(err)
		}
		var window []Payload
		for i := 0; i < count; i++ {
			p, err := s.Next()
			if err != nil {
				t.Fatalf("%d bytes, element %d: %v", size, i, err)
			}
			window = append(window, p)
			if len(window) > held {
				checkElement(t, i-held, window[0].Data, size)
				s.Release(window[0])
				window = window[1:]
			}
		}
		for k, p := range window {
			checkElement(t, count-len(window)+k, p.Data, size)
		}
		s.st.mu.Lock()
		lent := len(s.st.lent)
		s.st.mu.Unlock()
		if wantLent := size > largeRead; (lent > 0) != wantLent {
			t.Fatalf("%d bytes: %d of the %d held elements in their frames' buffers, want them there: %v", size, lent, held, wantLent)
		}
	}
}

// checkElement fails unless data is element i of a bigStreamer: size
// bytes of byte(i).
func checkElement(t *testing.T, i int, data []byte, size int) {
	t.Helper()
	if len(data) != size {
		t.Fatalf("element %d: %d bytes, want %d", i, len(data), size)
	}
	for j, x := range data {
		if x != byte(i) {
			t.Fatalf("element %d of %d bytes: byte %d is %d, overwritten by element %d", i, size, j, x, x)
		}
	}
}

// TestStreamReleaseSmallPayloads: payloads below minRecycled are copied
// from the connection's shared slab, which must never be reused for
// another payload; releasing them changes nothing. The test reads them
// after Release on purpose (the API forbids it): a slab piece that went
// to a pool would show a later element's bytes.
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

// heldChannel is a channel responder that waits for start, then takes
// count payloads without releasing any and reports how many of them the
// connection handed over in their frames' own buffers.
type heldChannel struct {
	UnimplementedResponder
	start chan struct{}
	count int
	lent  chan int
}

func (h *heldChannel) RequestChannel(ctx context.Context, _ Payload, in *Stream, _ *Sink) error {
	<-h.start
	for i := 0; i < h.count; i++ {
		p, err := in.Next()
		if err != nil {
			return err
		}
		if len(p.Data) == 0 || p.Data[0] != byte(i) || p.Data[len(p.Data)-1] != byte(i) {
			return fmt.Errorf("element %d damaged", i)
		}
	}
	in.st.mu.Lock()
	h.lent <- len(in.st.lent)
	in.st.mu.Unlock()
	return nil
}

// TestReleasedChannelsFromTheFirstPayload: with WithReleasedChannels a
// channel's payloads that arrive before its handler runs (an upload's
// first window, while the handler creates its file) already come in
// their frames' buffers; without it they are copies.
func TestReleasedChannelsFromTheFirstPayload(t *testing.T) {
	const count, size = 4, 256 << 10
	for _, released := range []bool{false, true} {
		h := &heldChannel{start: make(chan struct{}), count: count, lent: make(chan int, 1)}
		var opts []Option
		if released {
			opts = append(opts, WithReleasedChannels())
		}
		c := bytePair(t, h, nil, opts)
		ch, err := c.RequestChannel(tctx(t), Payload{Data: []byte("go")}, 1)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < count; i++ {
			if err := ch.Send(Payload{Data: bytes.Repeat([]byte{byte(i)}, size)}); err != nil {
				t.Fatal(err)
			}
		}
		close(h.start) // all sent (Send returns once queued): most arrive before the handler reads
		lent := <-h.lent
		if want := map[bool]int{false: 0, true: count}[released]; lent != want {
			t.Fatalf("WithReleasedChannels %v: %d of %d payloads in their frames' buffers, want %d", released, lent, count, want)
		}
	}
}

// emptyBufPool takes every free buffer out of the frame buffer pool, class
// by class, leaving them to the collector.
func emptyBufPool() {
	for n := 1; frame.PooledBytes() > 0; {
		cls, size := frame.BufClass(n)
		if cls < 0 {
			return
		}
		for before := frame.PooledBytes(); before > 0; before = frame.PooledBytes() {
			_ = frame.GetBuf(size)
			if frame.PooledBytes() == before {
				break // this class is empty: GetBuf made a new buffer
			}
		}
		n = size + 1
	}
}
