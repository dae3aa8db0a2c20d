package rsocket

import (
	"bytes"
	"io"
	"net"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/testwait"

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

// A large payload's frames join the output queue in the pooled buffer
// the machine encoded them into, whatever waits before them: the sender
// copies an upload's chunk once, into its frame. The queue copied every
// payload that found it non-empty (a write in flight, as under an
// upload's window of chunks) into one buffer it grew by doubling, so
// each chunk was copied two or three times before the socket.
func TestLargePayloadsQueuedInTheirOwnBuffers(t *testing.T) {
	const size, count = 1 << 20, 4
	a, peer := net.Pipe() // the peer reads nothing until the end: the SETUP's write stays in flight
	defer peer.Close()
	c, err := ClientConn(tctx(t), a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testwait.For(t, "the SETUP's write in flight", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.writing
	})
	for i := range count {
		if err := c.FireAndForget(tctx(t), Payload{Data: bytes.Repeat([]byte{byte(i)}, size)}); err != nil {
			t.Fatalf("payload %d: %v", i, err)
		}
	}
	testwait.For(t, "every payload queued", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.queued() >= count*size
	})
	c.mu.Lock()
	var bufs [][]byte
	for _, p := range c.outFront {
		bufs = append(bufs, p.b)
	}
	bufs = append(bufs, c.out)
	c.mu.Unlock()
	for i, b := range bufs {
		if len(b) > size+size/2 {
			t.Fatalf("queued buffer %d of %d holds %d bytes: the %d-byte payloads were copied into one queue buffer", i, len(bufs), len(b), size)
		}
	}
	if len(bufs) < count {
		t.Fatalf("%d payloads of %d bytes waiting in %d buffers", count, size, len(bufs))
	}
	go func() { _, _ = io.Copy(io.Discard, peer) }()
}
