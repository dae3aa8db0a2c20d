package grpcserve

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/h2raw"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
	"github.com/sluicehq/sluice/internal/testkit/syncbuf"
	"github.com/sluicehq/sluice/internal/testkit/testpki"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/transport/serving"
)

// stallClock drives a sink's stall watch: tick makes it look once, at the
// clock's current time, and returns once the look is over.
type stallClock struct {
	now     atomic.Int64 // nanoseconds since base
	base    time.Time
	tick    chan time.Time
	checked chan struct{}
}

func withStallClock(h *serving.Host) *stallClock {
	k := &stallClock{base: time.Unix(1e9, 0), tick: make(chan time.Time), checked: make(chan struct{})}
	h.StallTick = k.tick
	h.StallNow = func() time.Time { return k.base.Add(time.Duration(k.now.Load())) }
	h.StallChecked = func() { k.checked <- struct{}{} }
	return k
}

func (k *stallClock) advance(d time.Duration) { k.now.Add(int64(d)) }

func (k *stallClock) look(t *testing.T) {
	t.Helper()
	select {
	case k.tick <- time.Time{}:
	case <-time.After(wait):
		t.Fatal("the stall watch does not tick")
	}
	select {
	case <-k.checked:
	case <-time.After(wait):
		t.Fatal("the stall watch did not finish its look")
	}
}

// dialRaw connects an h2raw client to the harness's sink (over TLS with
// tc), granting the sink a 1 GiB window: it can stop in the middle of a
// gRPC message, which a gRPC client never does.
func dialRaw(t *testing.T, h *harness, tc *tls.Config) *h2raw.Client {
	t.Helper()
	var c net.Conn
	var err error
	if tc != nil {
		c, err = tls.Dial("tcp", h.cc.Target(), tc)
	} else {
		c, err = net.Dial("tcp", h.cc.Target())
	}
	if err != nil {
		t.Fatal(err)
	}
	return h2raw.Start(t, c, 1<<30)
}

// message is req with its gRPC length prefix.
func message(t *testing.T, req *sluicev1.Request) []byte {
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...)
}

// streamState returns what the watch knows of stream id of the sink's
// connections (a copy; ok false if none).
func streamState(s *Server, id uint32) (st stallStream, ok bool) {
	return watchedStream(s.stalls, id)
}

// watchedStream returns what w knows of stream id of its connections (a
// copy; ok false if none).
func watchedStream(w *StallWatch, id uint32) (st stallStream, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.conns {
		c.mu.Lock()
		if p := c.streams[id]; p != nil {
			st, ok = *p, true
		}
		c.mu.Unlock()
	}
	return st, ok
}

// A client sends its Hello, then the first 200 KiB of a 2 MiB message,
// and stops: the sink closes the connection once the stall timeout has
// passed with nothing more, and not before; in plaintext and over TLS.
func TestStalledMessage(t *testing.T) {
	t.Run("plaintext", func(t *testing.T) {
		var k *stallClock
		h := newHarness(t, func(c *serving.Host) { k = withStallClock(c) })
		testStalledMessage(t, h, k, nil)
	})
	t.Run("tls", func(t *testing.T) {
		ca := testpki.NewCA(t)
		var k *stallClock
		h := &harness{t: t, logs: &syncbuf.Buffer{}, hostMod: func(c *serving.Host) { k = withStallClock(c) }}
		h.cfg = sink.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(h.logs, nil)),
			TLS: &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "sink", x509.ExtKeyUsageServerAuth)}, MinVersion: tls.VersionTLS12}}
		client := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
		h.dial = []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(client))}
		h.start()
		t.Cleanup(h.stop)
		raw := client.Clone()
		raw.NextProtos = []string{"h2"}
		testStalledMessage(t, h, k, raw)
	})
}

func testStalledMessage(t *testing.T, h *harness, k *stallClock, tc *tls.Config) {
	r := dialRaw(t, h, tc)
	r.Open(1, sluicev1.Sink_Send_FullMethodName, "sink")
	r.Data(t, 1, message(t, sinkclient.Hello("staller")))
	big := make([]byte, 5+200<<10)
	binary.BigEndian.PutUint32(big[1:], 2<<20)
	r.Data(t, 1, big)
	testwait.For(t, "the sink to receive 200 KiB of the message", func() bool {
		st, _ := streamState(h.srv, 1)
		return st.held == int64(len(big))
	})

	k.look(t) // the watch sees the bytes arrive
	k.advance(h.host.StallTimeout - time.Second)
	k.look(t)
	if got := metricValue(t, h, "sluice_sink_stalled_conns_total"); got != 0 {
		t.Fatalf("stalled_conns_total = %v before the stall timeout, want 0", got)
	}
	k.advance(time.Second)
	k.look(t)
	if got := metricValue(t, h, "sluice_sink_stalled_conns_total"); got != 1 {
		t.Errorf("stalled_conns_total = %v, want 1", got)
	}
	select {
	case <-r.Closed:
	case <-time.After(wait):
		t.Fatal("the sink did not close the stalled connection")
	}
	if logs := h.logs.String(); !strings.Contains(logs, "stopped sending") || !strings.Contains(logs, "held_bytes=") {
		t.Errorf("no warning naming the bytes held in the logs:\n%s", logs)
	}
	testwait.For(t, "the watch to forget the connection", func() bool {
		return h.srv.stalls.watched() <= 1 // the harness's own client may be connected
	})
	// The sink serves the others as before.
	a := h.connect("agent")
	a.Send(sinkclient.PlainRequest(1, sinkclient.Records(1, 3)...))
	a.Collect(1) // fails the test if no ack comes
}

// A client that trickles its message after 200 KiB (1 KiB per quarter
// timeout) does not keep it alive: it is cut once a timeout has passed
// with less than StallBytes more.
func TestStallTrickle(t *testing.T) {
	var k *stallClock
	h := newHarness(t, func(c *serving.Host) { k = withStallClock(c) })
	r := dialRaw(t, h, nil)
	r.Open(1, sluicev1.Sink_Send_FullMethodName, "sink")
	r.Data(t, 1, message(t, sinkclient.Hello("trickler")))
	big := make([]byte, 5+200<<10)
	binary.BigEndian.PutUint32(big[1:], 2<<20)
	r.Data(t, 1, big)
	fed := int64(len(big))
	testwait.For(t, "the sink to receive 200 KiB", func() bool { st, _ := streamState(h.srv, 1); return st.held == fed })
	k.look(t) // mark
	for i := 1; i <= 4; i++ {
		r.Data(t, 1, make([]byte, 1<<10))
		fed += 1 << 10
		testwait.For(t, "the sink to receive 1 KiB more", func() bool { st, _ := streamState(h.srv, 1); return st.held == fed })
		k.advance(h.host.StallTimeout / 4)
		k.look(t)
		want := 0.0
		if i == 4 {
			want = 1
		}
		if got := metricValue(t, h, "sluice_sink_stalled_conns_total"); got != want {
			t.Fatalf("after %d quarter timeouts of trickle: stalled_conns_total = %v, want %v", i, got, want)
		}
	}
	select {
	case <-r.Closed:
	case <-time.After(wait):
		t.Fatal("the sink did not close the trickling connection")
	}
}

// A 4 MiB message over a link that delivers a 16 KiB frame every eighth
// of the stall timeout (twice StallBytes per timeout; 2 KiB/s at the
// default) is received whole; an agent and a consumer that stay idle for
// hours after are not cut.
func TestStallSparesProgressAndIdle(t *testing.T) {
	var k *stallClock
	h := newHarness(t, func(c *serving.Host) { k = withStallClock(c) })
	r := dialRaw(t, h, nil)
	r.Open(1, sluicev1.Sink_Send_FullMethodName, "sink")
	r.Data(t, 1, message(t, sinkclient.Hello("slow")))
	recs := make([]string, 0, 64)
	for i := range 64 {
		recs = append(recs, strings.Repeat(string(rune('a'+i%26)), (4<<20)/64-64))
	}
	msg := message(t, sinkclient.PlainRequest(1, recs...))
	if len(msg) < 4<<20-16<<10 {
		t.Fatalf("test message of %d bytes, want about 4 MiB", len(msg))
	}
	for off := 0; off < len(msg); off += 16 << 10 {
		end := min(off+16<<10, len(msg))
		r.Data(t, 1, msg[off:end])
		if end == len(msg) {
			break
		}
		testwait.For(t, "the sink to receive the frame", func() bool {
			st, _ := streamState(h.srv, 1)
			return st.prefixN == 5 && st.rest == int64(len(msg)-end)
		})
		k.advance(h.host.StallTimeout / 8)
		k.look(t)
	}
	testwait.For(t, "the message to be received whole", func() bool {
		st, ok := streamState(h.srv, 1)
		return ok && st.held == 0
	})

	// Idle: a real agent and a consumer, then hours of ticks.
	a := h.connect("agent")
	a.Send(sinkclient.PlainRequest(1, sinkclient.Records(1, 3)...))
	a.Collect(1)
	rd := h.read(&sluicev1.ReadStart{Follow: true})
	rd.Request(10)
	rd.Next()
	for range 20 {
		k.advance(h.host.StallTimeout * 10)
		k.look(t)
	}
	if got := metricValue(t, h, "sluice_sink_stalled_conns_total"); got != 0 {
		t.Errorf("stalled_conns_total = %v, want 0: a progressing or idle connection was cut", got)
	}
	select {
	case <-r.Closed:
		t.Error("the slow but progressing connection was closed")
	default:
	}
	a.Send(sinkclient.PlainRequest(2, sinkclient.Records(2, 3)...))
	a.Collect(2) // the idle agent's stream still works
	select {
	case err := <-rd.End:
		t.Errorf("the idle consumer's stream ended: %v", err)
	default:
	}
	// Closed connections leave the watch.
	r.Close()
	h.cc.Close()
	testwait.For(t, "the watch to forget closed connections", func() bool {
		return h.srv.stalls.watched() == 0
	})
}

// The watch follows frames split anywhere, padded DATA, and the sink's
// flow-control windows: a stream that the sink's own back-pressure holds
// (window closed) is not stalled; once the window opens it is.
func TestStallScan(t *testing.T) {
	var in, out bytes.Buffer
	fin, fout := http2.NewFramer(&in, nil), http2.NewFramer(&out, nil)
	in.WriteString(http2.ClientPreface)
	_ = fin.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte{0x82}, EndHeaders: true})
	msg := make([]byte, 5+100<<10)
	binary.BigEndian.PutUint32(msg[1:], 1<<20)
	for off := 0; off < len(msg); off += 10 << 10 {
		_ = fin.WriteDataPadded(3, false, msg[off:min(off+10<<10, len(msg))], make([]byte, 7))
	}
	// The sink's window: exactly the bytes sent (DATA frames count their
	// padding and its length byte).
	sent := int64(len(msg)) + int64((len(msg)+10<<10-1)/(10<<10))*8
	_ = fout.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(sent)}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 14})
	_ = fout.WriteWindowUpdate(0, 1<<30)

	c := NewStallWatch(StallOptions{}).track(nil)
	for _, b := range out.Bytes() { // the sink's SETTINGS go first
		c.out.scan([]byte{b}, c.outFrame, nil, c.outPayload, c.outEnd)
	}
	for _, b := range in.Bytes() {
		c.in.scan([]byte{b}, c.inFrame, c.inData, nil, c.inEnd)
	}
	st := c.streams[3]
	if st == nil || st.held != int64(len(msg)) || st.rest != 1<<20-int64(len(msg)-5) || st.win != 0 {
		t.Fatalf("stream state %+v, want held %d, window 0", st, len(msg))
	}
	t0 := time.Unix(1e9, 0)
	if c.stalled(t0, time.Minute) != 0 || c.stalled(t0.Add(time.Hour), time.Minute) != 0 {
		t.Error("a stream held back by the sink's closed window counts as stalled")
	}
	out.Reset()
	_ = fout.WriteWindowUpdate(3, 1<<20)
	c.out.scan(out.Bytes(), c.outFrame, nil, c.outPayload, c.outEnd)
	if held := c.stalled(t0.Add(2*time.Hour), time.Minute); held != int64(len(msg)) {
		t.Errorf("stalled = %d once the window opened, want %d", held, len(msg))
	}
	// The sink ends the stream (trailers): forgotten.
	out.Reset()
	_ = fout.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte{0x88}, EndHeaders: true, EndStream: true})
	c.out.scan(out.Bytes(), c.outFrame, nil, c.outPayload, c.outEnd)
	if len(c.streams) != 0 {
		t.Errorf("%d streams left after the sink ended the stream", len(c.streams))
	}
}

// BenchmarkStallScan measures what the watch costs the sink's reads: one
// op is a 1 MiB message in DATA frames of 16 KiB, read 32 KiB at a time.
func BenchmarkStallScan(b *testing.B) {
	var in bytes.Buffer
	fr := http2.NewFramer(&in, nil)
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82}, EndHeaders: true})
	hdrLen := in.Len()
	payload := make([]byte, 16<<10)
	for i := range 64 {
		p := payload
		if i == 0 { // one op is one message
			p = binary.BigEndian.AppendUint32([]byte{0}, 64*16<<10-5)
			p = append(p, payload[5:]...)
		}
		_ = fr.WriteData(1, false, p)
	}
	frames := in.Bytes()[hdrLen:]
	c := newStallConn(NewStallWatch(StallOptions{}), nil)
	c.in.skip = 0
	c.in.scan(in.Bytes()[:hdrLen], c.inFrame, c.inData, nil, c.inEnd)
	b.SetBytes(int64(len(frames)))
	b.ResetTimer()
	for range b.N {
		for p := frames; len(p) > 0; p = p[min(len(p), 32<<10):] {
			c.mu.Lock()
			c.in.scan(p[:min(len(p), 32<<10)], c.inFrame, c.inData, nil, c.inEnd)
			c.mu.Unlock()
		}
	}
}

// watched is the number of connections w follows.
func (w *StallWatch) watched() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.conns)
}
