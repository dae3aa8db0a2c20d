package rsocket_test

// Sink.SendLent against the foreign peers: our client opens a
// request-channel to each peer's echo server (rsocket-java, rsocket-py,
// rsocket-js; all echo every payload of a channel, metadata included) and
// sends, on one TCP connection, payloads that take the lent path (64 KiB
// and more, with and without metadata, several on the stream) mixed with
// copied ones (Send, and SendLent of a payload under 64 KiB), plus one
// lent payload over the connection's max frame size, which SendLent does
// not lend: it is copied and fragmented as by Send. The peer must echo
// exactly our bytes. Lending needs a byte stream (writev), so only TCP is
// covered: over WebSocket SendLent copies (Conn.mayLend).
//
// Our max frame here is 1 MiB (WithMaxFrameSize), as in the other interop
// tests that meter frames, so that the fragmented case stays small; the
// peers' own limit is the protocol's 16 MiB - 1 on TCP (24-bit length),
// which no frame of ours can exceed, lent or not.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/peers"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/conn"
)

// lentMaxFrame is our max frame size on the connections of these tests.
const lentMaxFrame = 1 << 20

// lentItem is one payload of the channel: its size, its metadata (none
// when empty), whether it goes by SendLent, and whether SendLent lends it
// (at least conn.MinLent and within one frame) rather than copying it.
type lentItem struct {
	size     int
	md       string
	viaLent  bool
	wantLent bool
}

// lentPlan interleaves lent and copied payloads on one stream.
var lentPlan = []lentItem{
	{size: conn.MinLent, viaLent: true, wantLent: true},                                    // the least that is lent
	{size: 200 << 10, md: "meta-1", viaLent: true, wantLent: true},                         // lent, with metadata
	{size: 1 << 10, md: "small"},                                                           // copied by Send
	{size: 300 << 10, viaLent: true, wantLent: true},                                       // lent right after a copied one
	{size: 256 << 10, md: "copied-big"},                                                    // large, copied by Send
	{size: conn.MinLent - 1, md: "under", viaLent: true},                                   // SendLent, copied: under MinLent
	{size: 512 << 10, md: "meta-2", viaLent: true, wantLent: true},                         // lent, with metadata
	{size: lentMaxFrame + 512<<10, md: "fragmented", viaLent: true},                        // over the max frame: copied, fragmented
	{size: lentMaxFrame - 1024, md: "near-the-frame-limit", viaLent: true, wantLent: true}, // lent, one frame
}

// lentData is payload i's data: a pattern of its own, regenerated for the
// comparison because the sent slice is overwritten once it is released.
func lentData(i, size int) []byte {
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(i*131 + j*7 + j>>10)
	}
	return b
}

// lentEcho sends lentPlan on a request-channel of c and checks that the
// peer echoed every payload byte for byte. Each lent payload's memory is
// cleared as soon as its written callback ran: an echo of the original
// bytes proves the writer no longer read it after saying so.
func lentEcho(t *testing.T, ctx context.Context, c *rsocket.Conn, out *frameMeter) string {
	t.Helper()
	lentBefore := c.PayloadsLent()
	ch, err := c.RequestChannel(ctx, rsocket.Payload{Data: []byte("open")}, uint32(len(lentPlan)+1))
	if err != nil {
		t.Fatal(err)
	}
	var calls, released atomic.Int64
	viaLent := 0
	sent := make(chan error, 1)
	go func() {
		for i, it := range lentPlan {
			p := rsocket.Payload{Data: lentData(i, it.size)}
			if it.md != "" {
				p.Metadata = []byte(it.md)
			}
			if !it.viaLent {
				if err := ch.Send(p); err != nil {
					sent <- fmt.Errorf("Send %d: %w", i, err)
					return
				}
				continue
			}
			viaLent++
			free := make(chan struct{})
			if err := ch.SendLent(p, func() { calls.Add(1); close(free) }); err != nil {
				sent <- fmt.Errorf("SendLent %d: %w", i, err)
				return
			}
			go func() {
				<-free
				clear(p.Data)
				released.Add(1)
			}()
		}
		sent <- ch.Complete()
	}()
	n := 0
	for ; ; n++ {
		p, err := ch.Next()
		if err != nil {
			if n != len(lentPlan)+1 {
				t.Fatalf("after %d echoes: %v", n, err)
			}
			break
		}
		if n == 0 {
			if string(p.Data) != "open" {
				t.Fatalf("first echo %q, want the channel's request", p.Data)
			}
			continue
		}
		if n > len(lentPlan) {
			t.Fatalf("more echoes than payloads sent: %d", n)
		}
		it := lentPlan[n-1]
		if !bytes.Equal(p.Data, lentData(n-1, it.size)) {
			t.Fatalf("payload %d (%d bytes, lent %v): the echo differs (%d bytes)", n-1, it.size, it.wantLent, len(p.Data))
		}
		if string(p.Metadata) != it.md {
			t.Fatalf("payload %d: metadata %q echoed, sent %q", n-1, p.Metadata, it.md)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "every SendLent's written callback", func() bool { return released.Load() == int64(viaLent) })
	if calls.Load() != int64(viaLent) {
		t.Fatalf("%d written calls for %d SendLent payloads", calls.Load(), viaLent)
	}
	wantLent := 0
	for _, it := range lentPlan {
		if it.wantLent {
			wantLent++
		}
	}
	if got := c.PayloadsLent() - lentBefore; got != uint64(wantLent) {
		t.Fatalf("%d payloads lent, want %d", got, wantLent)
	}
	if out.largest() > lentMaxFrame {
		t.Fatalf("we sent a frame over our max frame size: %v", out)
	}
	return fmt.Sprintf("%d payloads echoed byte for byte (%d lent, %d copied); our frames: %v", len(lentPlan), wantLent, len(lentPlan)-wantLent, out)
}

// lentDial connects our client to a peer's TCP server, metered, with
// lentMaxFrame.
func lentDial(t *testing.T, ctx context.Context, addr string) (*rsocket.Conn, *frameMeter) {
	t.Helper()
	nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	out := &frameMeter{}
	c, err := rsocket.ClientConn(ctx, meteredConn{nc, &frameMeter{}, out}, rsocket.WithMaxFrameSize(lentMaxFrame))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, out
}

// TestInteropJavaLent: SendLent to rsocket-java's echo server over TCP.
func TestInteropJavaLent(t *testing.T) {
	java, cp := rsocketJava(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	addrs, _ := peers.StartRSocketJavaServer(t, ctx, java, cp)
	c, out := lentDial(t, ctx, addrs["tcp"])
	t.Log(lentEcho(t, ctx, c, out))
}

// TestInteropPyLent: SendLent to rsocket-py's echo server over TCP.
func TestInteropPyLent(t *testing.T) {
	py := rsocketPy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	addr, _ := startPyServer(t, ctx, py)
	c, out := lentDial(t, ctx, addr)
	t.Log(lentEcho(t, ctx, c, out))
}

// TestInteropJSLent: SendLent to rsocket-js's echo server over TCP.
func TestInteropJSLent(t *testing.T) {
	node, modules := jsNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	port, _ := jsStartServer(t, ctx, node, modules, "tcp")
	c, out := lentDial(t, ctx, fmt.Sprintf("127.0.0.1:%d", port))
	t.Log(lentEcho(t, ctx, c, out))
}
