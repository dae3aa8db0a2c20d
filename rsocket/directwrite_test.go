package rsocket

import (
	"bytes"
	"net"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// withDirectWrite makes unlock's direct writes call f instead of
// rawSock.tryWrite.
func withDirectWrite(f func(*rawSock, []byte) (int, error)) Option {
	return func(o *options) { o.directWrite = f }
}

// A direct write the socket takes only part of leaves the rest of a
// frame to the writer; frames queued while it ran, a small one and then
// a large one (which moves the small one to the front of the queue,
// queueLarge), must go after that rest. Before the fix the rest went
// behind them: the peer read a KEEPALIVE's head, then the two
// FIRE_AND_FORGETs, then the KEEPALIVE's tail, and parsed garbage.
func TestDirectWriteTailGoesFirst(t *testing.T) {
	ctx := tctx(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	large := bytes.Repeat([]byte{0xAB}, 1<<20)
	var (
		once sync.Once
		srv  *Conn
		got  = make(chan *Conn, 1)
	)
	partial := func(raw *rawSock, buf []byte) (int, error) {
		cut := false
		once.Do(func() { cut = true })
		if !cut {
			return raw.tryWrite(buf)
		}
		// The socket takes half; meanwhile another goroutine queues a
		// small frame, then a large one.
		n, err := raw.tryWrite(buf[:len(buf)/2])
		if err != nil {
			return n, err
		}
		c := <-got
		done := make(chan error, 1)
		go func() {
			if err := c.FireAndForget(ctx, Payload{Data: []byte("small")}); err != nil {
				done <- err
				return
			}
			done <- c.FireAndForget(ctx, Payload{Data: large})
		}()
		if err := <-done; err != nil {
			t.Error(err)
		}
		return n, nil
	}
	srv, err = ServeConn(ctx, nc, newEcho(), withDirectWrite(partial))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	got <- srv
	rawSetup(t, peer)
	// The server's reader answers the KEEPALIVE itself: a direct write.
	if _, err := peer.Write(rawFrame(frame.AppendKeepalive(nil, true, 0, []byte("ping")))); err != nil {
		t.Fatal(err)
	}
	r := newFrameReader(peer)
	want := []struct {
		typ  frame.Type
		data []byte
	}{{frame.TypeKeepalive, []byte("ping")}, {frame.TypeRequestFNF, []byte("small")}, {frame.TypeRequestFNF, large}}
	for i, w := range want {
		f, err := r.readFrame(nil)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		h, err := frame.ParseHeader(f)
		if err != nil {
			t.Fatalf("frame %d (%d bytes): %v", i, len(f), err)
		}
		if h.Type != w.typ || !bytes.HasSuffix(f, w.data) {
			t.Fatalf("frame %d: %v of %d bytes, want %v ending in %d bytes of its data", i, h.Type, len(f), w.typ, len(w.data))
		}
	}
}
