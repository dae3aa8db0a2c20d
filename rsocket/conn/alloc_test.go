package conn

import (
	"testing"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// streamPair returns a client with a request-stream open to a server with
// (practically) unlimited credits.
func streamPair(t testing.TB) (*pair, uint32) {
	p := newPair(t, Config{}, Config{})
	sid := id(p.c.RequestStream(p.now, frame.MaxRequestN, nil, []byte("q")))
	p.pump()
	return p, sid
}

// TestSteadyStateAllocs: once buffers are warm, an element on an open
// stream costs no allocation on either end (send: encode into Out;
// receive: parse, copy into the event arena).
func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	p, sid := streamPair(t)
	data := make([]byte, 1024)
	var f []byte
	step := func() {
		if err := p.s.SendPayload(sid, nil, data, true, false); err != nil {
			t.Fatal(err)
		}
		rd := p.s.Ready()
		f, _, _ = NextFrame(rd.Out)
		p.c.Receive(0, f)
		p.s.Advance()
		if ev := p.c.Ready().Events; len(ev) != 1 || len(ev[0].Data) != 1024 {
			t.Fatalf("events %v", ev)
		}
		p.c.Advance()
	}
	step()
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Fatalf("%v allocations per element", n)
	}
}

// BenchmarkStreamElement: one 1 KiB element from responder to requester.
func BenchmarkStreamElement(b *testing.B) {
	p, sid := streamPair(b)
	data := make([]byte, 1024)
	b.ReportAllocs()
	b.SetBytes(1024)
	for b.Loop() {
		_ = p.s.SendPayload(sid, nil, data, true, false)
		f, _, _ := NextFrame(p.s.Ready().Out)
		p.c.Receive(0, f)
		p.s.Advance()
		p.c.Advance()
	}
}

// BenchmarkRequestResponse: one whole request-response exchange, 64 B each way.
func BenchmarkRequestResponse(b *testing.B) {
	p := newPair(b, Config{}, Config{})
	data := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		sid, _ := p.c.RequestResponse(p.now, nil, data)
		f, _, _ := NextFrame(p.c.Ready().Out)
		p.s.Receive(0, f)
		p.c.Advance()
		p.s.Advance()
		_ = p.s.SendPayload(sid, nil, data, true, true)
		f, _, _ = NextFrame(p.s.Ready().Out)
		p.c.Receive(0, f)
		p.s.Advance()
		p.c.Advance()
	}
}

// TestRequestResponseAllocs: once warm, a whole request-response exchange
// allocates nothing on either end: the streams freed by earlier exchanges
// are reused (before the reuse: one stream per end and exchange).
func TestRequestResponseAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	p := newPair(t, Config{}, Config{})
	data := make([]byte, 64)
	step := func() {
		sid, err := p.c.RequestResponse(p.now, nil, data)
		if err != nil {
			t.Fatal(err)
		}
		f, _, _ := NextFrame(p.c.Ready().Out)
		p.s.Receive(0, f)
		p.c.Advance()
		p.s.Advance()
		if err := p.s.SendPayload(sid, nil, data, true, true); err != nil {
			t.Fatal(err)
		}
		f, _, _ = NextFrame(p.s.Ready().Out)
		p.c.Receive(0, f)
		p.s.Advance()
		if ev := p.c.Ready().Events; len(ev) != 1 || !ev[0].Complete {
			t.Fatalf("events %v", ev)
		}
		p.c.Advance()
		if p.c.NumStreams() != 0 || p.s.NumStreams() != 0 {
			t.Fatalf("streams left: client %d, server %d", p.c.NumStreams(), p.s.NumStreams())
		}
	}
	step()
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Fatalf("%v allocations per exchange", n)
	}
}
