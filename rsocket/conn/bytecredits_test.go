package conn

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// offerFrame is a client's EXT[ExtByteCreditsWindow] (or, on a stream,
// EXT[ExtRequestBytes]) with value v.
func extFrame(stream, extType, v uint32) []byte {
	var d [4]byte
	binary.BigEndian.PutUint32(d[:], v)
	return must(frame.AppendExt(nil, stream, frame.FlagIgnore, extType, nil, d[:]))
}

// byteServer is a server with byte credits (window 4) that read SETUP and,
// when offer, the client's offer of window 4.
func byteServer(t *testing.T, offer bool) *Machine {
	m := newServer(t, Config{ByteCredits: 4})
	if offer {
		m.Receive(0, extFrame(0, ExtByteCreditsWindow, 4))
		if fs, _ := drain(t, m); describe(fs) != "EXT(0,WINDOW 4)" {
			t.Fatalf("server's answer to the offer: %s", describe(fs))
		}
	}
	return m
}

var byteStates = []struct {
	name  string
	setup func(t *testing.T) (*Machine, uint32)
}{
	{"stream responder, send 2 items / 4 bytes", func(t *testing.T) (*Machine, uint32) {
		m := byteServer(t, true)
		m.Receive(0, must(frame.AppendRequestStream(nil, 1, 0, 2, nil, []byte("q"))))
		return m, 1
	}},
	{"stream responder, 5-byte element sent: bytes -1", func(t *testing.T) (*Machine, uint32) {
		m := byteServer(t, true)
		m.Receive(0, must(frame.AppendRequestStream(nil, 1, 0, 2, nil, []byte("q"))))
		ok(t, m.SendPayload(1, nil, []byte("12345"), true, false))
		return m, 1
	}},
	{"channel responder, recv 1 item / 4 bytes", func(t *testing.T) (*Machine, uint32) {
		m := byteServer(t, true)
		m.Receive(0, must(frame.AppendRequestChannel(nil, 1, 0, 2, nil, []byte("q"))))
		ok(t, m.RequestN(1, 1))
		return m, 1
	}},
	{"channel responder, recv 2 items, 4-byte element received: bytes 0", func(t *testing.T) (*Machine, uint32) {
		m := byteServer(t, true)
		m.Receive(0, must(frame.AppendRequestChannel(nil, 1, 0, 2, nil, []byte("q"))))
		ok(t, m.RequestN(1, 2))
		m.Receive(0, must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, []byte("1234"))))
		return m, 1
	}},
	{"stream requester (server's, after its answer)", func(t *testing.T) (*Machine, uint32) {
		m := byteServer(t, true)
		return m, id(m.RequestStream(0, 2, nil, []byte("q")))
	}},
	{"stream responder, no offer after SETUP (plain RSocket)", func(t *testing.T) (*Machine, uint32) {
		m := byteServer(t, false)
		m.Receive(0, must(frame.AppendRequestStream(nil, 1, 0, 2, nil, []byte("q"))))
		return m, 1
	}},
	{"stream requester (server's, before the offer arrived)", func(t *testing.T) (*Machine, uint32) {
		m := byteServer(t, false)
		i := id(m.RequestStream(0, 2, nil, []byte("q")))
		m.Receive(0, extFrame(0, ExtByteCreditsWindow, 4)) // too late: not the frame after SETUP
		return m, i
	}},
}

var byteInputs = []struct {
	name string
	do   func(m *Machine, id uint32) error
}{
	{"recv PAYLOAD(N) 3B", func(m *Machine, id uint32) error {
		m.Receive(0, must(frame.AppendPayload(nil, id, frame.FlagNext, nil, []byte("abc"))))
		return nil
	}},
	{"recv PAYLOAD(FN) 3B", func(m *Machine, id uint32) error {
		m.Receive(0, must(frame.AppendPayload(nil, id, frame.FlagFollows|frame.FlagNext, nil, []byte("abc"))))
		return nil
	}},
	{"recv REQUEST_BYTES(10)", func(m *Machine, id uint32) error { m.Receive(0, extFrame(id, ExtRequestBytes, 10)); return nil }},
	{"recv REQUEST_BYTES(0)", func(m *Machine, id uint32) error { m.Receive(0, extFrame(id, ExtRequestBytes, 0)); return nil }},
	{"recv REQUEST_N(1)", func(m *Machine, id uint32) error {
		m.Receive(0, must(frame.AppendRequestN(nil, id, 1)))
		return nil
	}},
	{"SendPayload 3B", func(m *Machine, id uint32) error { return m.SendPayload(id, nil, []byte("abc"), true, false) }},
	{"RequestBytes(10)", func(m *Machine, id uint32) error { return m.RequestBytes(id, 10) }},
	{"RequestN(1)", func(m *Machine, id uint32) error { return m.RequestN(id, 1) }},
}

// TestByteCreditTable runs every byte-credit state × input, like
// TestStreamTable, against testdata/byte_credit_table.golden.
func TestByteCreditTable(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "# state | input | events | frames sent | command | stream after (items/bytes we may send, items/bytes the peer may send)\n")
	for _, st := range byteStates {
		fmt.Fprintf(&b, "\n## %s\n", st.name)
		for _, in := range byteInputs {
			m, sid := st.setup(t)
			drain(t, m)
			err := in.do(m, sid)
			fs, evs := drain(t, m)
			after := "gone"
			if s, r, ok := m.Credits(sid); ok {
				after = fmt.Sprintf("live send=%d recv=%d", s, r)
				if sb, rb, gov := m.ByteCredits(sid); gov {
					after = fmt.Sprintf("live send=%d/%dB recv=%d/%dB", s, sb, r, rb)
				} else {
					after += " (not governed)"
				}
			}
			fmt.Fprintf(&b, "%-22s | %-28s | %-30s | %-26s | %s\n", in.name, describeEvents(evs), describe(fs), errName(err), after)
		}
	}
	golden(t, "testdata/byte_credit_table.golden", b.String())
}

// TestByteCreditsNegotiation: the extension is on only when both ends have
// it; a plain peer (our own with it off) sees a plain connection either way.
func TestByteCreditsNegotiation(t *testing.T) {
	for _, tc := range []struct {
		name           string
		client, server uint32
		active         bool
	}{
		{"both", 100, 200, true},
		{"client only", 100, 0, false},
		{"server only", 0, 200, false},
		{"neither", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, Config{ByteCredits: tc.client}, Config{ByteCredits: tc.server})
			if p.c.ByteCreditsActive() != tc.active || p.s.ByteCreditsActive() != tc.active {
				t.Fatalf("active: client %v server %v, want %v", p.c.ByteCreditsActive(), p.s.ByteCreditsActive(), tc.active)
			}
			// A stream of 10 elements of 150 bytes, 10 items granted: with
			// the extension the server sends while its byte credit is
			// positive (100: one element), then waits for REQUEST_BYTES.
			sid := id(p.c.RequestStream(p.now, 10, nil, []byte("q")))
			p.pump()
			elem := make([]byte, 150)
			sent := 0
			for i := 0; i < 10; i++ {
				if p.s.SendPayload(sid, nil, elem, true, false) != nil {
					break
				}
				sent++
			}
			want := 10
			if tc.active {
				want = 1
			}
			if sent != want {
				t.Fatalf("sent %d elements before credits ran out, want %d", sent, want)
			}
			p.pump()
			if tc.active {
				ok(t, p.c.RequestBytes(sid, 150))
				p.pump()
				if err := p.s.SendPayload(sid, nil, elem, true, false); err != nil {
					t.Fatalf("after REQUEST_BYTES: %v", err)
				}
			} else if err := p.c.RequestBytes(sid, 150); err == nil {
				t.Fatal("RequestBytes allowed without the extension")
			}
			for _, f := range append(p.cFrame, p.sFrame...) {
				if h, _ := frame.ParseHeader(f); h.Type == frame.TypeError {
					t.Fatalf("an ERROR went out: %s", describe([][]byte{f}))
				}
			}
		})
	}
}

// TestByteCreditsBoundReceiver: a peer that sends past the byte credits
// fails the stream with ERROR[INVALID]; nothing is buffered beyond them.
func TestByteCreditsBoundReceiver(t *testing.T) {
	m := newServer(t, Config{ByteCredits: 10})
	m.Receive(0, extFrame(0, ExtByteCreditsWindow, 10))
	m.Receive(0, must(frame.AppendRequestChannel(nil, 1, 0, 1, nil, []byte("q"))))
	ok(t, m.RequestN(1, 100))
	drain(t, m)
	m.Receive(0, must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, make([]byte, 10)))) // uses the window
	m.Receive(0, must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, []byte("x"))))      // beyond
	fs, evs := drain(t, m)
	if got := describe(fs); got != "ERROR(1,INVALID)" {
		t.Fatalf("frames: %s", got)
	}
	if got := describeEvents(evs); got != "Payload(N) Error(INVALID,local)" {
		t.Fatalf("events: %s", got)
	}
}
