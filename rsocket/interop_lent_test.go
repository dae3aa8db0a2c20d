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
	"crypto/sha256"
	"fmt"
	"net"
	"os/exec"
	"strings"
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

// lentCounts: how many of lentPlan go by SendLent, and how many of those
// are lent.
func lentCounts() (viaLent, lent int) {
	for _, it := range lentPlan {
		if it.viaLent {
			viaLent++
		}
		if it.wantLent {
			lent++
		}
	}
	return viaLent, lent
}

// sendLentPlan sends lentPlan on s, each payload by Send or SendLent as
// planned. A lent payload's data is cleared as soon as its written
// callback ran (then released counts it): the receiver seeing the
// original bytes proves the writer read them before saying it was done.
func sendLentPlan(s *rsocket.Sink, calls, released *atomic.Int64) error {
	for i, it := range lentPlan {
		p := rsocket.Payload{Data: lentData(i, it.size)}
		if it.md != "" {
			p.Metadata = []byte(it.md)
		}
		if !it.viaLent {
			if err := s.Send(p); err != nil {
				return fmt.Errorf("Send %d: %w", i, err)
			}
			continue
		}
		free := make(chan struct{})
		if err := s.SendLent(p, func() { calls.Add(1); close(free) }); err != nil {
			return fmt.Errorf("SendLent %d: %w", i, err)
		}
		go func() {
			<-free
			clear(p.Data)
			released.Add(1)
		}()
	}
	return nil
}

// lentEcho sends lentPlan on a request-channel of c and checks that the
// peer echoed every payload byte for byte, and that every written
// callback ran.
func lentEcho(t *testing.T, ctx context.Context, c *rsocket.Conn, out *frameMeter) string {
	t.Helper()
	lentBefore := c.PayloadsLent()
	ch, err := c.RequestChannel(ctx, rsocket.Payload{Data: []byte("open")}, uint32(len(lentPlan)+1))
	if err != nil {
		t.Fatal(err)
	}
	var calls, released atomic.Int64
	sent := make(chan error, 1)
	go func() {
		err := sendLentPlan(&ch.Sink, &calls, &released)
		if err == nil {
			err = ch.Complete()
		}
		sent <- err
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
	viaLent, wantLent := lentCounts()
	testwait.For(t, "every SendLent's written callback", func() bool { return released.Load() == int64(viaLent) })
	if calls.Load() != int64(viaLent) {
		t.Fatalf("%d written calls for %d SendLent payloads", calls.Load(), viaLent)
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

// lentStreamer answers a request-stream "lent-plan" with lentPlan, sent
// by our responder's Sink (Send and SendLent as planned).
type lentStreamer struct {
	rsocket.UnimplementedResponder
	calls, released atomic.Int64
}

func (r *lentStreamer) RequestStream(_ context.Context, p rsocket.Payload, out *rsocket.Sink) error {
	if string(p.Data) != "lent-plan" {
		return rsocket.ApplicationError("unknown stream %q", p.Data)
	}
	return sendLentPlan(out, &r.calls, &r.released)
}

// TestInteropJavaLentResponder: our responder sends lentPlan by
// SendLent in a request-stream to rsocket-java's client over TCP (`Peer
// digest-stream`), which reports each element's size, SHA-256 and
// metadata.
func TestInteropJavaLentResponder(t *testing.T) {
	java, cp := rsocketJava(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mln := &meteredListener{Listener: tln}
	r := &lentStreamer{}
	conns := make(chan *rsocket.Conn, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rsocket.Serve(ctx, mln, r, rsocket.WithMaxFrameSize(lentMaxFrame), rsocket.WithOnConnect(func(c *rsocket.Conn) { conns <- c }))
	}()
	defer func() { cancel(); <-done }()
	out, err := exec.CommandContext(ctx, java, peers.JVMFlags, "-cp", cp, "sluice.interop.Peer", "digest-stream", tln.Addr().String(), "lent-plan").Output()
	if err != nil {
		t.Fatalf("java digest-stream: %v\n%s", err, out)
	}
	var elems []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(l, "\t")
		switch {
		case f[0] == "ELEM" && len(f) == 5:
			elems = append(elems, strings.Join(f[2:], "\t"))
		case f[0] == "DONE" && len(f) == 2:
		default:
			t.Fatalf("the java client printed %q", l)
		}
	}
	if len(elems) != len(lentPlan) {
		t.Fatalf("rsocket-java received %d elements, we sent %d", len(elems), len(lentPlan))
	}
	for i, it := range lentPlan {
		want := fmt.Sprintf("%d\t%x\t%s", it.size, sha256.Sum256(lentData(i, it.size)), it.md)
		if elems[i] != want {
			t.Fatalf("element %d: rsocket-java got %q, we sent %q", i, elems[i], want)
		}
	}
	viaLent, wantLent := lentCounts()
	testwait.For(t, "every SendLent's written callback", func() bool { return r.released.Load() == int64(viaLent) })
	if r.calls.Load() != int64(viaLent) {
		t.Fatalf("%d written calls for %d SendLent payloads", r.calls.Load(), viaLent)
	}
	c := <-conns
	if got := c.PayloadsLent(); got != uint64(wantLent) {
		t.Fatalf("%d payloads lent, want %d", got, wantLent)
	}
	_, sentMeter := mln.summary()
	if sentMeter.largest() > lentMaxFrame {
		t.Fatalf("we sent a frame over our max frame size: %v", sentMeter)
	}
	t.Logf("%d elements, SHA-256 as sent (%d lent, %d copied); our frames: %v", len(lentPlan), wantLent, len(lentPlan)-wantLent, sentMeter)
}
