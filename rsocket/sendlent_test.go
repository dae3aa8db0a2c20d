package rsocket

import (
	"bytes"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// SendLent queues a large payload's data as the caller's own slice, not
// a copy in a frame buffer, counts it in the output queue, calls written
// only once the data is on the socket, and puts on the wire the bytes
// Send would have: the frame's head and the data in one PAYLOAD frame.
// lentChannel opens a channel on a client over net.Pipe and grants it
// one credit beyond its first payload; the peer reads nothing: the
// SETUP's write stays in flight until it does.
func lentChannel(t *testing.T) (*Conn, *Channel, net.Conn) {
	a, peer := net.Pipe()
	t.Cleanup(func() { peer.Close() })
	c, err := ClientConn(tctx(t), a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	testwait.For(t, "the SETUP's write in flight", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.writing
	})
	ch, err := c.RequestChannel(tctx(t), Payload{Data: []byte("open")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	grant, _ := frame.AppendRequestN(frame.ReserveLengthPrefix(nil), 1, 1)
	if err := frame.SetLengthPrefix(grant, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Write(grant); err != nil { // the connection's reader takes it
		t.Fatal(err)
	}
	return c, ch, peer
}

func TestSendLentQueuesTheCallersMemory(t *testing.T) {
	const size = 128 << 10
	c, ch, peer := lentChannel(t)
	data := bytes.Repeat([]byte("lent"), size/4)
	md := []byte("meta")
	written := make(chan struct{})
	if err := ch.SendLent(Payload{Metadata: md, Data: data}, func() { close(written) }); err != nil {
		t.Fatal(err)
	}

	c.mu.Lock()
	lent := false
	for _, p := range c.outFront {
		if p.written != nil && len(p.b) == size && &p.b[0] == &data[0] {
			lent = true
		}
	}
	queued := c.queued()
	c.mu.Unlock()
	if !lent {
		t.Fatal("the payload's data is not queued as the caller's slice: it was copied")
	}
	if queued < size {
		t.Fatalf("the output queue counts %d bytes with a lent payload of %d queued", queued, size)
	}
	select {
	case <-written:
		t.Fatal("written called before the data was written")
	default:
	}

	var f []byte
	var err error
	var frames [][]byte
	for len(frames) < 3 { // SETUP, REQUEST_CHANNEL, the PAYLOAD
		if f, err = frame.ReadLengthPrefixed(peer, nil, 0); err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
	}
	want, err := frame.AppendPayload(nil, 1, frame.FlagNext, md, data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(frames[2], want) {
		t.Fatalf("the lent PAYLOAD on the wire (%d bytes) is not Send's (%d bytes)", len(frames[2]), len(want))
	}
	go func() { _, _ = io.Copy(io.Discard, peer) }()
	testwait.For(t, "written called once the data is written", func() bool {
		select {
		case <-written:
			return true
		default:
			return false
		}
	})
}

// A payload below conn.MinLent is copied into its frame as by Send, and
// written is called before SendLent returns: its memory is the caller's
// again at once.
func TestSendLentCopiesSmallPayloads(t *testing.T) {
	_, ch, peer := lentChannel(t)
	go func() { _, _ = io.Copy(io.Discard, peer) }()
	called := false // written runs under the connection's lock, before SendLent returns
	if err := ch.SendLent(Payload{Data: make([]byte, 1024)}, func() { called = true }); err != nil {
		t.Fatal(err)
	}
	if !called {
		t.Fatal("written not called when SendLent returned a small payload, which is copied")
	}
}

// A lent payload still queued when the connection fails is dropped with
// the queue, and written is called: the caller's memory is free again
// (xfer's upload Close waits for it).
func TestSendLentWrittenWhenDropped(t *testing.T) {
	_, ch, peer := lentChannel(t)
	written := make(chan struct{})
	if err := ch.SendLent(Payload{Data: make([]byte, 128<<10)}, func() { close(written) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-written:
		t.Fatal("written called before the data was written or dropped")
	default:
	}
	peer.Close() // the SETUP's write in flight fails: the queue is dropped
	testwait.For(t, "written called once the failed connection dropped the data", func() bool {
		select {
		case <-written:
			return true
		default:
			return false
		}
	})
}

// Several lent payloads queued behind a write in flight, the peer reading
// part of the output and then dropping the connection: every SendLent
// that returned nil has its written called exactly once (the one cut
// mid-write, the ones still queued), and a SendLent waiting for a credit
// when the connection fails returns an error without calling written.
func TestSendLentWrittenOnceEachWhenTheConnectionDrops(t *testing.T) {
	const size, queued = 128 << 10, 4
	_, ch, peer := lentChannel(t)
	grant, _ := frame.AppendRequestN(frame.ReserveLengthPrefix(nil), 1, queued-1)
	if err := frame.SetLengthPrefix(grant, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Write(grant); err != nil { // credits for all queued ones
		t.Fatal(err)
	}
	var calls [queued + 1]atomic.Int32
	for i := 0; i < queued; i++ {
		if err := ch.SendLent(Payload{Data: make([]byte, size)}, func() { calls[i].Add(1) }); err != nil {
			t.Fatalf("SendLent %d: %v", i, err)
		}
	}
	// One more, beyond the credits: it waits in SendLent.
	parked := make(chan error, 1)
	go func() {
		parked <- ch.SendLent(Payload{Data: make([]byte, size)}, func() { calls[queued].Add(1) })
	}()
	// The SETUP, the REQUEST_CHANNEL and part of the first lent payload
	// reach the peer; then the connection drops mid-frame.
	if _, err := io.ReadFull(peer, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	peer.Close()
	testwait.For(t, "written called for every queued lent payload", func() bool {
		for i := 0; i < queued; i++ {
			if calls[i].Load() == 0 {
				return false
			}
		}
		return true
	})
	if err := <-parked; err == nil {
		t.Fatal("SendLent waiting for a credit returned nil on a dropped connection")
	}
	for i := range calls {
		want := int32(1)
		if i == queued {
			want = 0 // SendLent failed: the memory was never the connection's
		}
		if n := calls[i].Load(); n != want {
			t.Fatalf("payload %d: written called %d times, want %d", i, n, want)
		}
	}
}
