package conn

// Tests of the connection-level rules. Each cites the Protocol.md section
// (github.com/rsocket/rsocket) it checks.

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// Reference: "Connection Establishment", "Error Codes".
func TestServerSetup(t *testing.T) {
	setup := func(major uint16, flags frame.Flags, token []byte) []byte {
		return must(frame.AppendSetup(nil, frame.Setup{Header: frame.Header{Flags: flags}, MajorVersion: major,
			KeepaliveInterval: 100, MaxLifetime: 500, ResumeToken: token}))
	}
	setup11 := must(frame.AppendSetup(nil, frame.Setup{MajorVersion: 1, MinorVersion: 1, KeepaliveInterval: 100, MaxLifetime: 500}))
	badSetup := setup(1, 0, nil)
	badSetup[10], badSetup[11], badSetup[12], badSetup[13] = 0, 0, 0, 0 // keepalive interval 0
	for _, tc := range []struct {
		name  string
		first []byte
		want  string // frames sent; "" means accepted
	}{
		{"SETUP 1.0", setup(1, 0, nil), ""},
		{"SETUP 2.0", setup(2, 0, nil), "ERROR(0,UNSUPPORTED_SETUP)"},
		{"SETUP with resume", setup(1, 0, []byte("tok")), "ERROR(0,REJECTED_SETUP)"},
		{"SETUP 1.1", setup11, "ERROR(0,UNSUPPORTED_SETUP)"},
		{"SETUP with lease, server without lease", setup(1, frame.FlagLease, nil), "ERROR(0,UNSUPPORTED_SETUP)"},
		{"SETUP keepalive 0", badSetup, "ERROR(0,INVALID_SETUP)"},
		{"truncated frame", []byte{0, 0}, "ERROR(0,CONNECTION_ERROR)"},
		{"RESUME", must(frame.AppendResume(nil, 1, 0, []byte("t"), 0, 0)), "ERROR(0,REJECTED_RESUME)"},
		{"REQUEST_RESPONSE", must(frame.AppendRequestResponse(nil, 1, 0, nil, nil)), "ERROR(0,INVALID_SETUP)"},
		{"KEEPALIVE", must(frame.AppendKeepalive(nil, true, 0, nil)), "ERROR(0,INVALID_SETUP)"},
		{"METADATA_PUSH", must(frame.AppendMetadataPush(nil, []byte("x"))), "ERROR(0,INVALID_SETUP)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := New(Config{Role: Server}, 0)
			m.Receive(0, tc.first)
			fs, evs := drain(t, m)
			closed, err := m.Closed()
			if tc.want == "" {
				if closed || len(fs) != 0 || len(evs) != 1 || evs[0].Kind != EventSetup {
					t.Fatalf("not accepted: %s %v %v", describe(fs), evs, err)
				}
				if d, ok := m.NextDeadline(); !ok || d != 500*time.Millisecond {
					t.Fatalf("deadline %v %v, want the client's max lifetime", d, ok)
				}
				return
			}
			if got := describe(fs); got != tc.want {
				t.Fatalf("sent %s, want %s", got, tc.want)
			}
			if !closed || len(evs) != 1 || evs[0].Kind != EventClosed {
				t.Fatalf("not closed: %v", evs)
			}
		})
	}
}

// The client's SETUP carries version 1.0 and the configuration.
func TestClientSetupFrame(t *testing.T) {
	m, err := New(Config{Role: Client, KeepaliveInterval: 500 * time.Millisecond, MaxLifetime: 3 * time.Second,
		DataMIME: "application/json", SetupData: []byte("hello")}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.RequestResponse(0, nil, nil); !errors.Is(err, ErrNotReady) {
		t.Fatalf("request before Start: %v", err)
	}
	ok(t, m.Start(0))
	fs, _ := drain(t, m)
	s, err := frame.ParseSetup(fs[0])
	if err != nil {
		t.Fatal(err)
	}
	if s.MajorVersion != 1 || s.MinorVersion != 0 || s.KeepaliveInterval != 500 || s.MaxLifetime != 3000 ||
		string(s.DataMIME) != "application/json" || string(s.MetadataMIME) != DefaultMetadataMIME ||
		string(s.Data) != "hello" || s.Metadata != nil || s.Lease() || s.ResumeEnabled() {
		t.Fatalf("SETUP %+v", s)
	}
}

// Reference: "Error Codes": a client refused by the server closes; the
// same ERROR after establishment is ignored ("Handling the Unexpected").
func TestClientSetupRejected(t *testing.T) {
	m, _ := New(Config{Role: Client}, 0)
	ok(t, m.Start(0))
	id := id(m.RequestStream(0, 1, nil, nil))
	drain(t, m)
	m.Receive(0, must(frame.AppendError(nil, 0, frame.ErrorCodeRejectedSetup, "go away")))
	_, evs := drain(t, m)
	if got := describeEvents(evs); got != "Error(REJECTED_SETUP,local) Closed" || evs[0].StreamID != id {
		t.Fatalf("events %s", got)
	}
	var pe *PeerError
	if _, err := m.Closed(); !errors.As(err, &pe) || pe.Code != frame.ErrorCodeRejectedSetup || pe.Message != "go away" {
		t.Fatalf("err %v", err)
	}

	m, _ = New(Config{Role: Client}, 0)
	ok(t, m.Start(0))
	m.Receive(0, must(frame.AppendKeepalive(nil, false, 0, nil))) // established
	m.Receive(0, must(frame.AppendError(nil, 0, frame.ErrorCodeRejectedSetup, "late")))
	if c, _ := m.Closed(); c {
		t.Fatal("setup error after establishment must be ignored")
	}
}

// Reference: "Handling the Unexpected". Every frame here must change
// nothing: no event, no frame sent, connection and stream untouched.
func TestIgnoreRules(t *testing.T) {
	ext := func(flags frame.Flags) []byte { return must(frame.AppendExt(nil, 1, flags, 7, nil, []byte("x"))) }
	unknown := func(flags frame.Flags) []byte {
		b := must(frame.AppendCancel(nil, 1))
		b[4], b[5] = byte(0x30<<2)|byte(flags>>8), byte(flags) // type 0x30
		return b
	}
	payloadOn0 := must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, []byte("x")))
	payloadOn0[3] = 0
	cancelOn0 := must(frame.AppendCancel(nil, 1))
	cancelOn0[3] = 0
	mpOn1 := must(frame.AppendMetadataPush(nil, []byte("x")))
	mpOn1[3] = 1
	reqNOn0 := must(frame.AppendRequestN(nil, 1, 1))
	reqNOn0[3] = 0
	unknownFlags := must(frame.AppendRequestN(nil, 9, 1))
	for _, tc := range []struct {
		name string
		f    []byte
	}{
		{"PAYLOAD on unknown stream", must(frame.AppendPayload(nil, 9, frame.FlagNext, nil, []byte("x")))},
		{"PAYLOAD on stream 0", payloadOn0},
		{"CANCEL on unknown stream", must(frame.AppendCancel(nil, 9))},
		{"CANCEL on stream 0", cancelOn0},
		{"ERROR on unknown stream", must(frame.AppendError(nil, 9, frame.ErrorCodeApplicationError, "x"))},
		{"REQUEST_N on unknown stream", must(frame.AppendRequestN(nil, 9, 5))},
		{"REQUEST_N on stream 0", reqNOn0},
		{"REQUEST_N with unknown flag bits on unknown stream", unknownFlags},
		{"METADATA_PUSH on stream 1", mpOn1},
		{"unknown type with I", unknown(frame.FlagIgnore)},
		{"EXT with I", ext(frame.FlagIgnore)},
		{"SETUP after the accepted one", setupFrame(t)},
		{"RESUME_OK", must(frame.AppendResumeOK(nil, 0))},
		{"LEASE without lease negotiated", must(frame.AppendLease(nil, 1000, 5, nil))},
		{"KEEPALIVE without R", must(frame.AppendKeepalive(nil, false, 0, []byte("x")))},
		{"server ignores ERROR[INVALID_SETUP]", must(frame.AppendError(nil, 0, frame.ErrorCodeInvalidSetup, "x"))},
		{"server ignores ERROR[REJECTED_RESUME]", must(frame.AppendError(nil, 0, frame.ErrorCodeRejectedResume, "x"))},
		{"request on the stream id in use", must(frame.AppendRequestStream(nil, 1, 0, 5, nil, []byte("again")))},
		{"request with the server's parity", must(frame.AppendRequestResponse(nil, 4, 0, nil, nil))},
		{"malformed REQUEST_N with I", func() []byte {
			b := must(frame.AppendRequestN(nil, 1, 1))
			b[4] |= byte(frame.FlagIgnore >> 8)
			return append(b, 0) // trailing byte: malformed
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newServer(t, Config{})
			m.Receive(0, must(frame.AppendRequestStream(nil, 5, 0, 2, nil, []byte("q"))))
			drain(t, m)
			if m.NumStreams() != 1 {
				t.Fatalf("setup: %d streams", m.NumStreams())
			}
			f := tc.f
			if tc.name == "request on the stream id in use" {
				f = must(frame.AppendRequestStream(nil, 5, 0, 5, nil, []byte("again")))
			}
			m.Receive(0, f)
			fs, evs := drain(t, m)
			if len(fs) != 0 || len(evs) != 0 {
				t.Fatalf("sent %s, events %v", describe(fs), evs)
			}
			if c, err := m.Closed(); c {
				t.Fatalf("closed: %v", err)
			}
			if s, _, _ := m.Credits(5); m.NumStreams() != 1 || s != 2 {
				t.Fatalf("stream 5 changed: %d streams, credits %d", m.NumStreams(), s)
			}
		})
	}
}

// Frames the spec makes connection errors.
func TestConnectionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    []byte
	}{
		{"EXT without I", must(frame.AppendExt(nil, 1, 0, 7, nil, nil))},
		{"metadata length beyond the frame", func() []byte {
			b := must(frame.AppendPayload(nil, 1, frame.FlagNext, []byte("md"), []byte("d")))
			b[8] = 200
			return b
		}()},
		{"truncated", []byte{0, 0, 0, 1, 0x28}},
		{"ERROR[CONNECTION_ERROR] from the peer", must(frame.AppendError(nil, 0, frame.ErrorCodeConnectionError, "bye"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newServer(t, Config{})
			m.Receive(0, must(frame.AppendRequestStream(nil, 1, 0, 2, nil, nil)))
			drain(t, m)
			m.Receive(0, tc.f)
			fs, evs := drain(t, m)
			if c, _ := m.Closed(); !c {
				t.Fatal("not closed")
			}
			if got := describeEvents(evs); !strings.HasPrefix(got, "Error(") || !strings.HasSuffix(got, "Closed") {
				t.Fatalf("events %s", got)
			}
			if strings.HasPrefix(tc.name, "ERROR") != (len(fs) == 0) {
				t.Fatalf("sent %s", describe(fs))
			}
		})
	}
}

// A request with an invalid N gets ERROR[INVALID] and leaves no state;
// "Frame Types" REQUEST_STREAM: initial N > 0.
func TestInvalidInitialN(t *testing.T) {
	m := newServer(t, Config{})
	b := must(frame.AppendRequestStream(nil, 1, 0, 1, nil, nil))
	b[6], b[7], b[8], b[9] = 0, 0, 0, 0
	m.Receive(0, b)
	fs, evs := drain(t, m)
	if describe(fs) != "ERROR(1,INVALID)" || len(evs) != 0 || m.NumStreams() != 0 {
		t.Fatalf("sent %s, events %v", describe(fs), evs)
	}
}

// Reference: "Stream Identifiers": client odd from 1, server even from 2,
// sequential, never reused.
func TestStreamIDs(t *testing.T) {
	p := newPair(t, Config{}, Config{})
	var got []uint32
	for i := 0; i < 3; i++ {
		got = append(got, id(p.c.RequestResponse(p.now, nil, nil)))
		got = append(got, id(p.s.RequestResponse(p.now, nil, nil)))
	}
	if want := []uint32{1, 2, 3, 4, 5, 6}; !equal(got, want) {
		t.Fatalf("ids %v, want %v", got, want)
	}
	// Exhaustion: ids are not reused.
	m := newServer(t, Config{})
	m.nextID = frame.MaxStreamID - 1
	if i := id(m.RequestFNF(0, nil, nil)); i != frame.MaxStreamID-1 {
		t.Fatalf("id %d", i)
	}
	if _, err := m.RequestFNF(0, nil, nil); !errors.Is(err, ErrStreamIDsExhausted) {
		t.Fatalf("err %v", err)
	}
}

func equal(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Reference: "KEEPALIVE Frame", "Handling the Unexpected" (dead transports).
func TestKeepalive(t *testing.T) {
	c, _ := New(Config{Role: Client, KeepaliveInterval: time.Second, MaxLifetime: 3 * time.Second}, 0)
	ok(t, c.Start(0))
	drain(t, c)
	if d, _ := c.NextDeadline(); d != time.Second {
		t.Fatalf("deadline %v", d)
	}
	c.Tick(999 * time.Millisecond)
	if fs, _ := drain(t, c); len(fs) != 0 {
		t.Fatalf("early keepalive %s", describe(fs))
	}
	c.Tick(time.Second)
	fs, _ := drain(t, c)
	if describe(fs) != "KEEPALIVE(0,R)" {
		t.Fatalf("sent %s", describe(fs))
	}
	if k, _ := frame.ParseKeepalive(fs[0]); !k.Respond() {
		t.Fatal("client keepalive without R")
	}
	// The server echoes R-cleared with the same data.
	s := newServer(t, Config{})
	s.Receive(0, must(frame.AppendKeepalive(nil, true, 0, []byte("ping"))))
	fs, _ = drain(t, s)
	k, err := frame.ParseKeepalive(fs[0])
	if err != nil || k.Respond() || string(k.Data) != "ping" {
		t.Fatalf("echo %+v %v", k, err)
	}
	// A frame resets the lifetime; silence past it closes with
	// ERROR[CONNECTION_ERROR] and fails every stream.
	c.Receive(2500*time.Millisecond, must(frame.AppendKeepalive(nil, false, 0, nil)))
	sid := id(c.RequestStream(0, 5, nil, nil))
	drain(t, c)
	if d, _ := c.NextDeadline(); d != 2*time.Second { // the keepalive due at 2s was not ticked yet
		t.Fatalf("deadline %v", d)
	}
	c.Tick(5499 * time.Millisecond)
	fs, _ = drain(t, c)
	if describe(fs) != "KEEPALIVE(0,R)" {
		t.Fatalf("sent %s", describe(fs))
	}
	if d, _ := c.NextDeadline(); d != 5500*time.Millisecond {
		t.Fatalf("deadline %v", d)
	}
	c.Tick(5500 * time.Millisecond)
	fs, evs := drain(t, c)
	if describe(fs) != "ERROR(0,CONNECTION_ERROR)" || describeEvents(evs) != "Error(CONNECTION_ERROR,local) Closed" || evs[0].StreamID != sid {
		t.Fatalf("sent %s events %s", describe(fs), describeEvents(evs))
	}
	if _, err := c.Closed(); !errors.Is(err, ErrKeepaliveTimeout) {
		t.Fatalf("err %v", err)
	}
	if _, ok := c.NextDeadline(); ok {
		t.Fatal("deadline after close")
	}
	if _, err := c.RequestResponse(0, nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("request after close: %v", err)
	}
}

// Reference: "Reactive Streams Semantics": credits are cumulative and
// 2^31-1 is a number, not "unbounded" (rsocket-java #1110).
func TestCreditsSaturateButCount(t *testing.T) {
	p := newPair(t, Config{}, Config{})
	sid := id(p.c.RequestStream(p.now, frame.MaxRequestN, nil, nil))
	p.pump()
	for i := 0; i < 3; i++ {
		ok(t, p.s.SendPayload(sid, nil, []byte("x"), true, false))
	}
	p.pump()
	send, _, _ := p.s.Credits(sid)
	_, recv, _ := p.c.Credits(sid)
	if send != frame.MaxRequestN-3 || recv != frame.MaxRequestN-3 {
		t.Fatalf("credits after 3 items: responder %d requester %d", send, recv)
	}
	ok(t, p.c.RequestN(sid, frame.MaxRequestN))
	p.pump()
	send, _, _ = p.s.Credits(sid)
	if send != frame.MaxRequestN {
		t.Fatalf("saturated credits %d", send)
	}
	// Near exhaustion the count still decreases to 0 and stops, and a new
	// REQUEST_N lets the stream continue.
	p.s.streams[sid].sendCredits = 1
	p.c.streams[sid].recvCredits = 1
	ok(t, p.s.SendPayload(sid, nil, []byte("last"), true, false))
	if err := p.s.SendPayload(sid, nil, []byte("over"), true, false); !errors.Is(err, ErrNoCredits) {
		t.Fatalf("INVARIANT request-n: SendPayload beyond the peer's REQUEST_N credits returned %v, want ErrNoCredits", err)
	}
	p.pump()
	ok(t, p.c.RequestN(sid, 1))
	p.pump()
	ok(t, p.s.SendPayload(sid, nil, []byte("more"), true, true))
	p.pump()
	if p.c.NumStreams() != 0 || p.s.NumStreams() != 0 {
		t.Fatal("stream not finished")
	}
}

// A peer that sends beyond its credits gets ERROR[INVALID] (or CANCEL from
// a stream requester) and the application an Error event.
func TestPeerBeyondCredits(t *testing.T) {
	m := newServer(t, Config{})
	m.Receive(0, must(frame.AppendRequestChannel(nil, 1, 0, 1, nil, []byte("first"))))
	ok(t, m.RequestN(1, 1))
	drain(t, m)
	m.Receive(0, must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, []byte("a"))))
	m.Receive(0, must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, []byte("b"))))
	fs, evs := drain(t, m)
	if describe(fs) != "ERROR(1,INVALID)" || describeEvents(evs) != "Payload(N) Error(INVALID,local)" {
		t.Fatalf("sent %s events %s", describe(fs), describeEvents(evs))
	}
}

// Reference: "Fragmentation And Reassembly".
func TestFragmentation(t *testing.T) {
	const size = 100
	p := newPair(t, Config{MaxFrameSize: size}, Config{MaxFrameSize: size})
	md := bytes.Repeat([]byte("m"), 250)
	data := bytes.Repeat([]byte("d"), 333)
	sid := id(p.c.RequestChannel(p.now, 1, md, data, false))
	p.pump()
	var ev Event
	for _, e := range p.sEv {
		if e.Kind == EventRequest {
			ev = e
		}
	}
	if ev.StreamID != sid || !bytes.Equal(ev.Metadata, md) || !bytes.Equal(ev.Data, data) || ev.N != 1 {
		t.Fatalf("reassembled request %v", ev)
	}
	// The request: REQUEST_CHANNEL with F, then PAYLOADs with F, the last
	// without; metadata entirely before data.
	var seen []string
	dataStarted := false
	for _, f := range p.cFrame[1:] { // after SETUP
		if len(f) > size {
			t.Fatalf("frame of %d bytes > %d", len(f), size)
		}
		h, _ := frame.ParseHeader(f)
		seen = append(seen, h.Type.String()+"/"+flagString(h.Flags))
		var fmd, fdata []byte
		if h.Type == frame.TypeRequestChannel {
			r, _ := frame.ParseRequestChannel(f)
			fmd, fdata = r.Metadata, r.Data
		} else {
			r, _ := frame.ParsePayload(f)
			fmd, fdata = r.Metadata, r.Data
		}
		if len(fmd) > 0 && dataStarted {
			t.Fatal("metadata after data")
		}
		if len(fdata) > 0 {
			dataStarted = true
		}
	}
	if seen[0] != "REQUEST_CHANNEL/MF" || seen[len(seen)-1] != "PAYLOAD/N" || len(seen) != 7 {
		t.Fatalf("frames %v", seen)
	}
	// A fragmented response PAYLOAD counts one credit; C only on the last
	// fragment (rsocket-go put it on the first).
	ok(t, p.s.RequestN(sid, 1))
	ok(t, p.s.SendPayload(sid, nil, data, true, true))
	n := len(p.sFrame)
	p.pump()
	frags := p.sFrame[n+1:] // after the REQUEST_N
	if len(frags) < 2 {
		t.Fatalf("%d fragments", len(frags))
	}
	for i, f := range frags {
		h, _ := frame.ParseHeader(f)
		isLast := i == len(frags)-1
		if isLast != h.Has(frame.FlagComplete) || isLast == h.Has(frame.FlagFollows) {
			t.Fatalf("fragment %d flags %s", i, flagString(h.Flags))
		}
	}
	var got []byte
	for _, e := range p.cEv {
		if e.Kind == EventPayload {
			got = e.Data
			if !e.Complete || !e.Next {
				t.Fatalf("payload event %v", e)
			}
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("reassembled %d bytes", len(got))
	}
	if _, r, _ := p.c.Credits(sid); r != 0 {
		t.Fatalf("a fragmented payload took %d credits", 1-r)
	}
	// The frames over 16 MiB that must always be split (rsocket-js #306).
	big := make([]byte, frame.MaxFrameSize+10)
	p2 := newPair(t, Config{}, Config{}) // the default MaxPayloadSize takes it
	id2 := id(p2.c.RequestResponse(p2.now, nil, big))
	p2.pump()
	for _, f := range p2.cFrame {
		if len(f) > frame.MaxFrameSize {
			t.Fatalf("frame of %d bytes", len(f))
		}
	}
	if e := p2.sEv[len(p2.sEv)-1]; e.Kind != EventRequest || e.StreamID != id2 || len(e.Data) != len(big) {
		t.Fatalf("big request %v", e.Kind)
	}
}

// Bounded reassembly: per payload (ERROR[INVALID] on the stream) and over
// all streams (connection error); CANCEL mid-reassembly frees the buffer.
func TestReassemblyBounds(t *testing.T) {
	frag := func(id uint32, n int) []byte {
		return must(frame.AppendPayload(nil, id, frame.FlagFollows|frame.FlagNext, nil, make([]byte, n)))
	}
	m := newServer(t, Config{MaxPayloadSize: 1000, MaxReassemblyBytes: 1500})
	m.Receive(0, must(frame.AppendRequestResponse(nil, 1, frame.FlagFollows, nil, make([]byte, 600))))
	m.Receive(0, frag(1, 300))
	if m.ReassemblyBytes() != 900 {
		t.Fatalf("held %d", m.ReassemblyBytes())
	}
	m.Receive(0, frag(1, 200)) // 1100 > 1000
	fs, evs := drain(t, m)
	if describe(fs) != "ERROR(1,INVALID)" || len(evs) != 0 || m.ReassemblyBytes() != 0 || m.NumStreams() != 0 {
		t.Fatalf("sent %s events %v held %d", describe(fs), evs, m.ReassemblyBytes())
	}
	// CANCEL mid-reassembly drops the buffer, silently.
	m.Receive(0, must(frame.AppendRequestStream(nil, 3, frame.FlagFollows, 1, nil, make([]byte, 500))))
	m.Receive(0, must(frame.AppendCancel(nil, 3)))
	fs, evs = drain(t, m)
	if len(fs)+len(evs) != 0 || m.ReassemblyBytes() != 0 || m.NumStreams() != 0 {
		t.Fatalf("cancel: sent %s events %v held %d", describe(fs), evs, m.ReassemblyBytes())
	}
	// Over the connection's total: ERROR[CONNECTION_ERROR], closed.
	m.Receive(0, must(frame.AppendRequestStream(nil, 5, frame.FlagFollows, 1, nil, make([]byte, 900))))
	m.Receive(0, must(frame.AppendRequestStream(nil, 7, frame.FlagFollows, 1, nil, make([]byte, 500))))
	m.Receive(0, frag(7, 200))
	fs, evs = drain(t, m)
	if describe(fs) != "ERROR(0,CONNECTION_ERROR)" || describeEvents(evs) != "Closed" || m.ReassemblyBytes() != 0 {
		t.Fatalf("sent %s events %s held %d", describe(fs), describeEvents(evs), m.ReassemblyBytes())
	}
}

// MaxStreams: a request beyond it is REJECTED without state; the
// application's own is refused.
func TestMaxStreams(t *testing.T) {
	m := newServer(t, Config{MaxStreams: 2})
	m.Receive(0, must(frame.AppendRequestStream(nil, 1, 0, 1, nil, nil)))
	ok(t, func() error { _, err := m.RequestStream(0, 1, nil, nil); return err }())
	m.Receive(0, must(frame.AppendRequestStream(nil, 3, 0, 1, nil, nil)))
	fs, evs := drain(t, m)
	if !strings.HasSuffix(describe(fs), "ERROR(3,REJECTED)") || len(evs) != 1 || m.NumStreams() != 2 {
		t.Fatalf("sent %s events %v", describe(fs), evs)
	}
	if _, err := m.RequestResponse(0, nil, nil); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("err %v", err)
	}
}

// Reference: "Resume Operation" (implied positions): what one end counts as
// sent the other counts as received; connection frames do not count.
func TestPositions(t *testing.T) {
	p := newPair(t, Config{MaxFrameSize: 100}, Config{})
	sid := id(p.c.RequestChannel(p.now, 2, []byte("m"), bytes.Repeat([]byte("x"), 200), false))
	ok(t, p.c.MetadataPush([]byte("push")))
	p.pump()
	ok(t, p.s.RequestN(sid, 3))
	ok(t, p.s.SendPayload(sid, nil, []byte("y"), true, false))
	p.c.Tick(DefaultKeepaliveInterval)
	p.pump()
	cs, cr := p.c.Positions()
	ss, sr := p.s.Positions()
	if cs != sr || ss != cr || cs == 0 || ss == 0 {
		t.Fatalf("client %d/%d server %d/%d", cs, cr, ss, sr)
	}
	var want uint64
	for _, f := range p.cFrame {
		if h, _ := frame.ParseHeader(f); h.Resumable() {
			want += uint64(len(f))
		}
	}
	if cs != want {
		t.Fatalf("client sent position %d, frames say %d", cs, want)
	}
}

// Reference: "Error Codes" CONNECTION_CLOSE: outstanding streams finish,
// new requests are refused, then the connection closes.
func TestConnectionCloseDrains(t *testing.T) {
	p := newPair(t, Config{}, Config{})
	sid := id(p.c.RequestStream(p.now, 1, nil, nil))
	p.pump()
	p.c.Receive(0, must(frame.AppendError(nil, 0, frame.ErrorCodeConnectionClose, "bye")))
	if _, err := p.c.RequestResponse(p.now, nil, nil); !errors.Is(err, ErrDraining) {
		t.Fatalf("err %v", err)
	}
	ok(t, p.s.SendPayload(sid, nil, []byte("x"), true, true))
	p.pump()
	if c, _ := p.c.Closed(); !c {
		t.Fatal("not closed after the last stream")
	}
}

// The transport dying fails every stream exactly once and closes.
func TestTransportClosed(t *testing.T) {
	p := newPair(t, Config{}, Config{})
	a := id(p.c.RequestStream(p.now, 1, nil, nil))
	b := id(p.c.RequestChannel(p.now, 1, nil, nil, false))
	p.pump()
	p.c.TransportClosed(errors.New("reset"))
	p.c.TransportClosed(errors.New("again"))
	_, evs := drain(t, p.c)
	if describeEvents(evs) != "Error(CONNECTION_ERROR,local) Error(CONNECTION_ERROR,local) Closed" || evs[0].StreamID != a || evs[1].StreamID != b {
		t.Fatalf("events %s", describeEvents(evs))
	}
}

func TestMetadataPush(t *testing.T) {
	p := newPair(t, Config{}, Config{})
	ok(t, p.c.MetadataPush([]byte("cfg")))
	p.pump()
	if e := p.sEv[len(p.sEv)-1]; e.Kind != EventMetadataPush || string(e.Metadata) != "cfg" {
		t.Fatalf("event %v", e)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Role: Client, KeepaliveInterval: time.Microsecond},
		{Role: Client, MaxFrameSize: 10},
		{Role: Client, MaxFrameSize: frame.MaxFrameSize + 1},
		{Role: Client, MaxPayloadSize: 10, MaxReassemblyBytes: 5},
		{Role: Client, MaxFrameSize: 64, DataMIME: strings.Repeat("x", 60)}, // SETUP cannot fit
	} {
		if _, err := New(cfg, 0); err == nil {
			t.Errorf("accepted %+v", cfg)
		}
	}
}

// Reference: "Lease Semantics", "Connection Establishment" (L flag).
func TestLease(t *testing.T) {
	p := newPair(t, Config{Lease: true}, Config{Lease: true})
	if p.c.LeaseAvailable(0) || p.s.LeaseAvailable(0) {
		t.Fatal("lease available before any LEASE")
	}
	if _, err := p.c.RequestResponse(p.now, nil, nil); !errors.Is(err, ErrNoLease) {
		t.Fatalf("client request before LEASE: %v", err)
	}
	if _, err := p.s.RequestResponse(p.now, nil, nil); !errors.Is(err, ErrNoLease) {
		t.Fatalf("server request before LEASE: %v", err)
	}
	ok(t, p.s.SendLease(0, 10*time.Second, 2))
	p.pump()
	if e := p.cEv[len(p.cEv)-1]; e.Kind != EventLease || e.N != 2 || e.TTL != 10*time.Second {
		t.Fatalf("event %v", e)
	}
	if !p.c.LeaseAvailable(0) || p.s.LeaseAvailable(0) {
		t.Fatal("LeaseAvailable: client should have a lease, server none")
	}
	id(p.c.RequestResponse(p.now, nil, nil))
	id(p.c.RequestFNF(p.now, nil, nil))
	if p.c.LeaseAvailable(0) {
		t.Fatal("lease of 2 still available after 2 requests")
	}
	if _, err := p.c.RequestResponse(p.now, nil, nil); !errors.Is(err, ErrNoLease) {
		t.Fatalf("third request on a lease of 2: %v", err)
	}
	ok(t, p.s.SendLease(0, time.Second, 5))
	p.pump()
	if !p.c.LeaseAvailable(time.Second-1) || p.c.LeaseAvailable(time.Second) {
		t.Fatal("LeaseAvailable does not follow the TTL")
	}
	p.c.Tick(time.Second) // the lease expires
	if _, err := p.c.RequestResponse(p.now, nil, nil); !errors.Is(err, ErrNoLease) {
		t.Fatalf("request after the TTL: %v", err)
	}

	// The responder answers requests beyond its lease with ERROR[REJECTED]
	// and no side effect; a fragmented request counts once.
	m, _ := New(Config{Role: Server, Lease: true}, 0)
	m.Receive(0, must(frame.AppendSetup(nil, frame.Setup{Header: frame.Header{Flags: frame.FlagLease}, MajorVersion: 1,
		KeepaliveInterval: 1000, MaxLifetime: 5000})))
	drain(t, m)
	m.Receive(0, must(frame.AppendRequestResponse(nil, 1, 0, nil, nil)))
	fs, evs := drain(t, m)
	if describe(fs) != "ERROR(1,REJECTED)" || len(evs) != 0 || m.NumStreams() != 0 {
		t.Fatalf("INVARIANT lease: the responder admitted a request without a lease: sent %s events %v", describe(fs), evs)
	}
	ok(t, m.SendLease(0, time.Second, 2))
	m.Receive(10, must(frame.AppendRequestResponse(nil, 3, frame.FlagFollows, nil, []byte("a"))))
	m.Receive(10, must(frame.AppendPayload(nil, 3, frame.FlagFollows|frame.FlagNext, nil, []byte("b"))))
	m.Receive(10, must(frame.AppendPayload(nil, 3, frame.FlagNext, nil, []byte("c"))))
	m.Receive(20, must(frame.AppendRequestStream(nil, 5, 0, 1, nil, nil)))
	m.Receive(30, must(frame.AppendRequestStream(nil, 7, 0, 1, nil, nil)))
	fs, evs = drain(t, m)
	if describe(fs) != "LEASE(0) ERROR(7,REJECTED)" || describeEvents(evs) != "Request Request" || string(evs[0].Data) != "abc" {
		t.Fatalf("sent %s events %s", describe(fs), describeEvents(evs))
	}
	ok(t, m.SendLease(0, time.Second, 10))
	m.Receive(time.Second, must(frame.AppendRequestStream(nil, 9, 0, 1, nil, nil)))
	if fs, _ := drain(t, m); describe(fs) != "LEASE(0) ERROR(9,REJECTED)" {
		t.Fatalf("request after the TTL: sent %s", describe(fs))
	}
}

// Found by the simulation (seed 2448): a channel responder that cancels
// while a fragmented PAYLOAD is half received must not later deliver it on
// the half it closed, and must free the buffer.
func TestCancelDropsReassembly(t *testing.T) {
	m := newServer(t, Config{})
	m.Receive(0, must(frame.AppendRequestChannel(nil, 1, 0, 1, nil, []byte("q"))))
	ok(t, m.RequestN(1, 1))
	m.Receive(0, must(frame.AppendPayload(nil, 1, frame.FlagFollows|frame.FlagNext, nil, []byte("part"))))
	drain(t, m)
	ok(t, m.Cancel(1))
	if m.ReassemblyBytes() != 0 {
		t.Fatalf("%d bytes held after cancel", m.ReassemblyBytes())
	}
	m.Receive(0, must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, []byte("rest"))))
	if _, evs := drain(t, m); len(evs) != 0 {
		t.Fatalf("events after cancel: %s", describeEvents(evs))
	}
}

// The seeds that found bugs, kept whatever -sim.seeds says.
func TestSimulationRegressions(t *testing.T) {
	for _, seed := range []uint64{2448} {
		if err := runSim(seed); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// Close(CONNECTION_CLOSE) is graceful on the sending end too.
func TestCloseGracefully(t *testing.T) {
	p := newPair(t, Config{}, Config{})
	sid := id(p.c.RequestStream(p.now, 1, nil, nil))
	p.pump()
	ok(t, p.s.Close(frame.ErrorCodeConnectionClose, "maintenance"))
	if err := p.s.Close(frame.ErrorCodeConnectionClose, "again"); !errors.Is(err, ErrDraining) {
		t.Fatalf("second close: %v", err)
	}
	if _, err := p.s.RequestResponse(p.now, nil, nil); !errors.Is(err, ErrDraining) {
		t.Fatalf("request while draining: %v", err)
	}
	p.pump()
	if c, _ := p.s.Closed(); c {
		t.Fatal("closed with a stream alive")
	}
	p.c.RequestResponse(p.now, nil, nil) // refused locally: the client drains too
	ok(t, p.s.SendPayload(sid, nil, []byte("last"), true, true))
	p.pump()
	var le *LocalError
	var pe *PeerError
	_, serr := p.s.Closed()
	_, cerr := p.c.Closed()
	if !errors.As(serr, &le) || le.Code != frame.ErrorCodeConnectionClose || !errors.As(cerr, &pe) || pe.Message != "maintenance" {
		t.Fatalf("server %v, client %v", serr, cerr)
	}
	if e := p.cEv[len(p.cEv)-2]; e.Kind != EventPayload || string(e.Data) != "last" {
		t.Fatalf("last stream did not finish: %v", e)
	}
}

// TestOutOfOrderPeerIDs: ids of the peer's parity that arrive below the
// highest seen still open streams. Protocol.md asks for locally unique ids,
// not increasing ones on the wire; rsocket-go writes requests from many
// goroutines, and refusing such ids lost its requests in the interop run.
func TestOutOfOrderPeerIDs(t *testing.T) {
	m := newServer(t, Config{})
	for _, id := range []uint32{9, 3, 7, 1} {
		m.Receive(0, must(frame.AppendRequestResponse(nil, id, 0, nil, []byte("q"))))
	}
	drain(t, m)
	if n := m.NumStreams(); n != 4 {
		t.Fatalf("%d streams open, want 4", n)
	}
	// An id in use is still ignored.
	m.Receive(0, must(frame.AppendRequestResponse(nil, 3, 0, nil, []byte("again"))))
	drain(t, m)
	if n := m.NumStreams(); n != 4 {
		t.Fatalf("after reusing a live id: %d streams, want 4", n)
	}
}
