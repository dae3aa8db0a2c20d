package conn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// resumeRun streams n items server → client, credits 8 at a time, with
// small frames (fragmentation) and cuts the transport after every cut-th
// frame delivered (both directions count); frames in flight are lost. It
// returns what the client received, in order.
func resumeRun(t *testing.T, n, cut, frameSize int) ([]uint32, error) {
	return resumeRunOpts(t, n, cut, frameSize, nil, 0)
}

// resumeRunOpts: with rnd, the cut comes after each frame with chance
// 1/cut instead of every cut-th frame, time advances 1ms a step, both
// ends tick (keepalives every 10ms trim the retained buffers), and the
// server retains at most bound bytes.
func resumeRunOpts(t *testing.T, n, cut, frameSize int, rnd *rand.Rand, bound int) ([]uint32, error) {
	t.Helper()
	c, err := New(Config{Role: Client, ResumeToken: []byte("tok"), MaxFrameSize: frameSize,
		KeepaliveInterval: 10 * time.Millisecond, ResumeBufferBytes: bound}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Role: Server, Resume: true, MaxFrameSize: frameSize, ResumeBufferBytes: bound}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(0); err != nil {
		t.Fatal(err)
	}
	var got []uint32
	var toS, toC [][]byte // in flight
	sent, streamID := 0, uint32(0)
	sCredits := uint32(0)
	done := false
	var closed error
	delivered, cuts := 0, 0
	defer func() { t.Logf("%d items, %d frames delivered, %d cuts", len(got), delivered, cuts) }()
	handle := func(m *Machine, isClient bool) {
		r := m.Ready()
		out := r.Out
		for {
			f, rest, ok := NextFrame(out)
			if !ok {
				break
			}
			if isClient {
				toS = append(toS, append([]byte{}, f...))
			} else {
				toC = append(toC, append([]byte{}, f...))
			}
			out = rest
		}
		evs := append([]Event{}, r.Events...)
		for i := range evs {
			evs[i].Data = append([]byte{}, evs[i].Data...)
		}
		m.Advance()
		for _, ev := range evs {
			switch ev.Kind {
			case EventRequest:
				streamID, sCredits = ev.StreamID, ev.N
			case EventRequestN:
				sCredits += ev.N
			case EventPayload:
				if ev.Next {
					got = append(got, binary.BigEndian.Uint32(ev.Data))
					if len(got)%8 == 0 {
						_ = m.RequestN(ev.StreamID, 8)
					}
				}
				if ev.Complete {
					done = true
				}
			case EventError:
				closed = fmt.Errorf("stream error: %s", ev.Message)
			case EventClosed:
				if closed == nil {
					closed = ev.Err
				}
			}
		}
	}
	if _, err := c.RequestStream(0, 8, nil, []byte("go")); err != nil {
		t.Fatal(err)
	}
	now := time.Duration(0)
	for steps := 0; steps < 10_000_000 && !done && closed == nil; steps++ {
		if rnd != nil {
			now += time.Millisecond
			c.Tick(now)
			s.Tick(now)
			if r, _ := s.RetainedBytes(); r > bound {
				return got, fmt.Errorf("server retains %d bytes, bound %d", r, bound)
			}
		}
		handle(c, true)
		handle(s, false)
		for streamID != 0 && sCredits > 0 && sent < n {
			d := make([]byte, 4+frameSize/2) // two or three fragments each
			binary.BigEndian.PutUint32(d, uint32(sent))
			sent++
			if err := s.SendPayload(streamID, nil, d, true, sent == n); err != nil {
				t.Fatalf("send %d: %v", sent, err)
			}
			sCredits--
		}
		handle(s, false)
		if len(toS) == 0 && len(toC) == 0 {
			if c.rs.link != linkUp || s.rs.link != linkUp {
				return got, errors.New("stuck with the link down")
			}
			continue
		}
		// Deliver one frame, alternating directions.
		if len(toS) > 0 && (steps%2 == 0 || len(toC) == 0) {
			f := toS[0]
			toS = toS[1:]
			s.Receive(now, f)
		} else {
			f := toC[0]
			toC = toC[1:]
			c.Receive(now, f)
			if frame.Type(f[4]>>2) == frame.TypeResumeOK {
				continue // a link that dies after every RESUME_OK makes no progress
			}
		}
		delivered++
		if (rnd == nil && cut > 0 && delivered%cut == 0) || (rnd != nil && rnd.IntN(cut) == 0) {
			toS, toC = nil, nil
			cuts++
			c.TransportClosed(errors.New("cut"))
			s.TransportClosed(errors.New("cut"))
			handle(c, true)
			handle(s, false)
			toS, toC = nil, nil // nothing written while down reaches the wire
			if err := c.Reconnected(now); err != nil {
				return got, err
			}
			handle(c, true)
			if len(toS) != 1 {
				return got, fmt.Errorf("client sent %d frames after Reconnected, want RESUME only", len(toS))
			}
			resume := toS[0]
			toS = nil
			if !s.AcceptResume(now, resume) {
				handle(s, false)
				return got, fmt.Errorf("resume rejected: %v", closed)
			}
		}
	}
	return got, closed
}

// TestResumeSimEveryBoundary: a stream of n items arrives complete, in
// order, without duplicates, whatever frame boundary the transport is cut
// at, repeatedly.
func TestResumeSimEveryBoundary(t *testing.T) {
	const n = 60
	for cut := 1; cut <= 40; cut++ {
		for _, size := range []int{128, 1 << 10} {
			got, err := resumeRun(t, n, cut, size)
			seen := map[uint32]bool{}
			for _, v := range got {
				if seen[v] {
					// Checked first: a replay from the wrong position
					// delivers a frame twice and then fails the next resume.
					t.Fatalf("INVARIANT duplicated: cut every %d frames, frame size %d: item %d delivered twice after a resume", cut, size, v)
				}
				seen[v] = true
			}
			if err != nil {
				t.Fatalf("cut every %d frames, frame size %d: %v (got %d items)", cut, size, err, len(got))
			}
			if len(got) != n {
				t.Fatalf("cut %d size %d: %d items, want %d", cut, size, len(got), n)
			}
			for i, v := range got {
				if v != uint32(i) {
					t.Fatalf("cut %d size %d: item %d is %d (duplicate or reordering)", cut, size, i, v)
				}
			}
		}
	}
}

// TestResumeSimLongStreamRandomCuts: 200,000 items (20,000 with -short)
// through random cuts, the server's retained buffer bounded to 64 KiB and
// trimmed by keepalives: complete, in order, no duplicates.
func TestResumeSimLongStreamRandomCuts(t *testing.T) {
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	for seed := uint64(1); seed <= 3; seed++ {
		got, err := resumeRunOpts(t, n, 500, 256, rand.New(rand.NewPCG(seed, seed)), 64<<10)
		if err != nil {
			t.Fatalf("seed %d: %v (got %d items)", seed, err, len(got))
		}
		if len(got) != n {
			t.Fatalf("seed %d: %d items, want %d", seed, len(got), n)
		}
		for i, v := range got {
			if v != uint32(i) {
				t.Fatalf("seed %d: item %d is %d", seed, i, v)
			}
		}
	}
}

func resumePair(t *testing.T, scfg Config) *pair {
	scfg.Resume = true
	return newPair(t, Config{ResumeToken: []byte("tok"), MaxFrameSize: 1 << 10}, scfg)
}

func resumeFrameOf(t *testing.T, fs [][]byte) []byte {
	if len(fs) != 1 {
		t.Fatalf("want one RESUME frame, got %s", describe(fs))
	}
	return fs[0]
}

// resumeAfterCut breaks the client's transport (and the server's too,
// with both), lets the client reconnect and hands its RESUME to the
// server; it reports whether the server accepted it.
func (p *pair) resumeAfterCut(t *testing.T, both bool) bool {
	t.Helper()
	p.c.TransportClosed(errors.New("cut"))
	drain(t, p.c)
	if both {
		p.s.TransportClosed(errors.New("cut"))
		drain(t, p.s)
	}
	if err := p.c.Reconnected(p.now); err != nil {
		t.Fatal(err)
	}
	cf, _ := drain(t, p.c)
	return p.s.AcceptResume(p.now, resumeFrameOf(t, cf))
}

func TestResumeSetupRejectedWithoutResume(t *testing.T) {
	s, _ := New(Config{Role: Server}, 0)
	st := must(frame.AppendSetup(nil, frame.Setup{MajorVersion: 1, KeepaliveInterval: 1000, MaxLifetime: 5000, ResumeToken: []byte("x")}))
	s.Receive(0, st)
	fs, _ := drain(t, s)
	e, err := frame.ParseError(fs[0])
	if err != nil || e.Code != frame.ErrorCodeRejectedSetup {
		t.Fatalf("got %s, want ERROR[REJECTED_SETUP]", describe(fs))
	}
}

func TestResumeRejectedFailsStreamsNoRetry(t *testing.T) {
	p := resumePair(t, Config{})
	id, _ := p.c.RequestStream(p.now, 1, nil, []byte("x"))
	p.pump()
	p.c.TransportClosed(errors.New("cut"))
	_, evs := drain(t, p.c)
	if len(evs) != 1 || evs[0].Kind != EventReconnect {
		t.Fatalf("want Reconnect, got %s", describeEvents(evs))
	}
	if err := p.c.Reconnected(0); err != nil {
		t.Fatal(err)
	}
	drain(t, p.c)
	p.c.Receive(0, must(frame.AppendError(nil, 0, frame.ErrorCodeRejectedResume, "unknown token")))
	_, evs = drain(t, p.c)
	if len(evs) != 2 || evs[0].Kind != EventError || evs[0].StreamID != id || evs[1].Kind != EventClosed || !errors.Is(evs[1].Err, ErrResumeRejected) {
		t.Fatalf("got %s", describeEvents(evs))
	}
	if err := p.c.Reconnected(0); err == nil {
		t.Fatal("Reconnected after a rejected resume must fail (no retry)")
	}
}

func TestResumeNothingSentBeforeResumeOK(t *testing.T) {
	p := resumePair(t, Config{})
	id, _ := p.c.RequestChannel(p.now, 1, nil, []byte("x"), false)
	p.pump()
	p.c.TransportClosed(errors.New("cut"))
	drain(t, p.c)
	_ = p.c.Reconnected(0)
	if err := p.c.RequestN(id, 7); err != nil {
		t.Fatal(err)
	}
	p.c.Tick(30 * time.Second) // a keepalive would be due
	fs, _ := drain(t, p.c)
	if len(fs) != 1 || frame.Type(fs[0][4]>>2) != frame.TypeResume {
		t.Fatalf("want RESUME only, got %s", describe(fs))
	}
	p.s.TransportClosed(errors.New("cut"))
	drain(t, p.s)
	if !p.s.AcceptResume(0, fs[0]) {
		t.Fatal("rejected")
	}
	sf, _ := drain(t, p.s)
	for _, f := range sf {
		p.c.Receive(0, f)
	}
	cf, evs := drain(t, p.c)
	t.Logf("client after RESUME_OK: %s", describe(cf))
	if len(evs) == 0 || evs[0].Kind != EventResumed {
		t.Fatalf("after RESUME_OK: frames %s events %s", describe(cf), describeEvents(evs))
	}
	for _, f := range cf {
		p.s.Receive(0, f)
	}
	_, sev := drain(t, p.s)
	if len(sev) != 1 || sev[0].Kind != EventRequestN || sev[0].N != 7 {
		t.Fatalf("server got %s", describeEvents(sev))
	}
}

func TestResumeServerRejectsTooFarBehind(t *testing.T) {
	p := resumePair(t, Config{ResumeBufferBytes: 256})
	p.c.RequestStream(p.now, 100, nil, []byte("x"))
	p.pump()
	id := p.sEv[len(p.sEv)-1].StreamID
	for i := 0; i < 20; i++ { // 20 × ~40 B > 256: the oldest are dropped
		p.s.SendPayload(id, nil, make([]byte, 30), true, false)
	}
	drain(t, p.s) // lost on the wire
	if n, _ := p.s.RetainedBytes(); n > 256 {
		t.Fatalf("retained %d bytes, bound 256", n)
	}
	if p.resumeAfterCut(t, true) {
		t.Fatal("accepted a client further behind than the retained frames")
	}
	sf, sev := drain(t, p.s)
	e, err := frame.ParseError(sf[0])
	if err != nil || e.Code != frame.ErrorCodeRejectedResume || sev[len(sev)-1].Kind != EventClosed {
		t.Fatalf("got %s / %s", describe(sf), describeEvents(sev))
	}
}

// TestSetResumeBufferBytes: lowering the bound drops the oldest retained
// frames at once and holds for the frames sent after; a client that lost
// what was dropped is rejected, one within what is left resumes.
func TestSetResumeBufferBytes(t *testing.T) {
	p := resumePair(t, Config{})
	p.c.RequestStream(p.now, 1000, nil, []byte("x"))
	p.pump()
	id := p.sEv[len(p.sEv)-1].StreamID
	for i := 0; i < 20; i++ {
		p.s.SendPayload(id, nil, make([]byte, 30), true, false)
	}
	p.pump() // delivered: the client has all of it
	if n, _ := p.s.RetainedBytes(); n < 20*30 {
		t.Fatalf("retained %d bytes before lowering the bound", n)
	}
	p.s.SetResumeBufferBytes(200)
	p.s.SetResumeBufferBytes(0) // ignored
	if n, _ := p.s.RetainedBytes(); n > 200 || n == 0 {
		t.Fatalf("retained %d bytes after lowering the bound to 200", n)
	}
	for i := 0; i < 20; i++ {
		p.s.SendPayload(id, nil, make([]byte, 30), true, false)
		if n, _ := p.s.RetainedBytes(); n > 200 {
			t.Fatalf("retained %d bytes, bound 200", n)
		}
	}
	p.pump()
	// The client received everything: what is retained suffices.
	if !p.resumeAfterCut(t, true) {
		t.Fatal("a client that has every frame was refused after the bound was lowered")
	}
}

func TestResumeKeepaliveTrims(t *testing.T) {
	p := resumePair(t, Config{})
	p.c.RequestStream(p.now, 100, nil, []byte("x"))
	p.pump()
	if n, _ := p.c.RetainedBytes(); n == 0 {
		t.Fatal("request not retained")
	}
	p.now = 20 * time.Second
	p.c.Tick(p.now) // KEEPALIVE from the client; the server's answer carries its position
	p.pump()
	if n, first := p.c.RetainedBytes(); n != 0 {
		t.Fatalf("client retains %d bytes from %d after the server acknowledged", n, first)
	}
}

func TestResumeSessionExpires(t *testing.T) {
	p := resumePair(t, Config{ResumeSessionLifetime: time.Second})
	p.c.RequestStream(p.now, 1, nil, []byte("x"))
	p.pump()
	p.s.TransportClosed(errors.New("cut"))
	drain(t, p.s)
	dl, ok := p.s.NextDeadline()
	if !ok || dl != time.Second {
		t.Fatalf("deadline %v %v", dl, ok)
	}
	p.s.Tick(dl)
	_, evs := drain(t, p.s)
	if len(evs) != 2 || evs[1].Kind != EventClosed || !errors.Is(evs[1].Err, ErrResumeExpired) {
		t.Fatalf("got %s", describeEvents(evs))
	}
}

func TestResumeWrongTokenRejected(t *testing.T) {
	p := resumePair(t, Config{})
	p.s.TransportClosed(errors.New("cut"))
	drain(t, p.s)
	r := must(frame.AppendResume(nil, 1, 0, []byte("other"), 0, 0))
	if p.s.AcceptResume(0, r) {
		t.Fatal("accepted another token")
	}
}

// TestResumeSwappedVersion: a RESUME saying 0.1 (rsocket-js 1.0.0-alpha.3
// swaps the SETUP's major and minor) is taken as 1.0; 0.2, 2.0 and 2.1
// are refused.
func TestResumeSwappedVersion(t *testing.T) {
	for _, v := range []struct {
		major, minor uint16
		ok           bool
	}{{1, 0, true}, {0, 1, true}, {0, 2, false}, {2, 0, false}, {2, 1, false}} {
		p := resumePair(t, Config{})
		p.s.TransportClosed(errors.New("cut"))
		drain(t, p.s)
		r := must(frame.AppendResume(nil, v.major, v.minor, []byte("tok"), 0, 0))
		if got := p.s.AcceptResume(0, r); got != v.ok {
			fs, _ := drain(t, p.s)
			t.Errorf("RESUME version %d.%d: accepted %v, want %v (%s)", v.major, v.minor, got, v.ok, describe(fs))
		}
	}
}

// TestResumeClientCells: the remaining client cells of link state × input.
func TestResumeClientCells(t *testing.T) {
	resuming := func(t *testing.T) *pair {
		p := resumePair(t, Config{})
		p.c.RequestStream(p.now, 5, nil, []byte("x"))
		p.pump()
		p.c.TransportClosed(errors.New("cut"))
		drain(t, p.c)
		if err := p.c.Reconnected(0); err != nil {
			t.Fatal(err)
		}
		drain(t, p.c)
		return p
	}
	t.Run("resuming/PAYLOAD is a protocol error", func(t *testing.T) {
		p := resuming(t)
		p.c.Receive(0, must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, []byte("x"))))
		fs, evs := drain(t, p.c)
		if len(fs) != 1 || evs[len(evs)-1].Kind != EventClosed || !errors.Is(evs[len(evs)-1].Err, ErrProtocol) {
			t.Fatalf("got %s / %s", describe(fs), describeEvents(evs))
		}
	})
	t.Run("resuming/RESUME_OK beyond what was sent", func(t *testing.T) {
		p := resuming(t)
		p.c.Receive(0, must(frame.AppendResumeOK(nil, 1<<30)))
		_, evs := drain(t, p.c)
		if evs[len(evs)-1].Kind != EventClosed || !errors.Is(evs[len(evs)-1].Err, ErrResumeRejected) {
			t.Fatalf("got %s", describeEvents(evs))
		}
	})
	t.Run("resuming/no RESUME_OK within the lifetime reconnects", func(t *testing.T) {
		p := resuming(t)
		dl, _ := p.c.NextDeadline()
		p.c.Tick(dl)
		_, evs := drain(t, p.c)
		if len(evs) != 1 || evs[0].Kind != EventReconnect {
			t.Fatalf("got %s", describeEvents(evs))
		}
	})
	t.Run("down/frames of the lost transport are ignored", func(t *testing.T) {
		p := resumePair(t, Config{})
		p.c.RequestStream(p.now, 5, nil, []byte("x"))
		p.pump()
		_, before := p.c.Positions()
		p.c.TransportClosed(errors.New("cut"))
		drain(t, p.c)
		p.c.Receive(0, must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, []byte("late"))))
		fs, evs := drain(t, p.c)
		if _, after := p.c.Positions(); len(fs)+len(evs) != 0 || after != before {
			t.Fatalf("got %s / %s, position %d→%d", describe(fs), describeEvents(evs), before, after)
		}
	})
	t.Run("down/commands are retained, not written", func(t *testing.T) {
		p := resumePair(t, Config{})
		p.c.TransportClosed(errors.New("cut"))
		drain(t, p.c)
		if _, err := p.c.RequestStream(p.now, 5, nil, []byte("x")); err != nil {
			t.Fatal(err)
		}
		fs, _ := drain(t, p.c)
		if n, _ := p.c.RetainedBytes(); len(fs) != 0 || n == 0 {
			t.Fatalf("wrote %s, retained %d", describe(fs), n)
		}
	})
	t.Run("server up/RESUME replaces a half-open transport", func(t *testing.T) {
		p := resumePair(t, Config{})
		p.c.TransportClosed(errors.New("cut"))
		drain(t, p.c)
		_ = p.c.Reconnected(0)
		cf, _ := drain(t, p.c)
		if !p.s.AcceptResume(0, resumeFrameOf(t, cf)) {
			t.Fatal("rejected")
		}
		_, evs := drain(t, p.s)
		if len(evs) != 2 || evs[0].Kind != EventReconnect || evs[1].Kind != EventResumed {
			t.Fatalf("got %s", describeEvents(evs))
		}
	})
}

// TestResumeByteCredits: a byte-credits grant (EXT[ExtRequestBytes] on a
// stream) counts toward the resume positions on both ends and is retained
// for replay, like REQUEST_N. Before, the receiver counted it and the
// sender did not: RESUME_OK carried a position the client never sent and
// the client closed with CONNECTION_ERROR; and a grant lost in the cut
// was never replayed (the stream would wait for bytes forever).
func TestResumeByteCredits(t *testing.T) {
	p := newPair(t, Config{ResumeToken: []byte("tok"), ByteCredits: 100},
		Config{Resume: true, ByteCredits: 100})
	if !p.c.ByteCreditsActive() {
		t.Fatal("byte credits not agreed")
	}
	sid := id(p.c.RequestStream(p.now, 100, nil, []byte("q")))
	p.pump()
	if err := p.c.RequestBytes(sid, 50); err != nil { // delivered
		t.Fatal(err)
	}
	p.pump()
	cs, _ := p.c.Positions()
	_, sr := p.s.Positions()
	if cs != sr {
		t.Fatalf("client sent position %d, server received %d", cs, sr)
	}
	before, _, _ := p.s.ByteCredits(sid)
	if err := p.c.RequestBytes(sid, 300); err != nil { // lost in the cut
		t.Fatal(err)
	}
	drain(t, p.c)
	if !p.resumeAfterCut(t, true) {
		t.Fatal("server rejected the resume")
	}
	p.pump()
	for _, ev := range p.cEv {
		if ev.Kind == EventClosed {
			t.Fatalf("client closed after RESUME_OK: %v", ev.Err)
		}
	}
	if send, _, _ := p.s.ByteCredits(sid); send != before+300 {
		t.Fatalf("server's byte credit %d after resume, want %d (the lost grant replayed)", send, before+300)
	}
	cs, _ = p.c.Positions()
	_, sr = p.s.Positions()
	if cs != sr {
		t.Fatalf("after resume: client sent position %d, server received %d", cs, sr)
	}
}

// TestResumePositionRule pins which frames move the resume positions:
// every frame on a stream other than 0, whatever its type (EXT included:
// rsocket-java's rule, frame.IsResumable), and nothing on stream 0
// (KEEPALIVE, LEASE, METADATA_PUSH, EXT, a connection ERROR). Each row is
// received by a fresh resumable server with a stream 1 open; sending is
// checked on the client for the frames it emits itself.
func TestResumePositionRule(t *testing.T) {
	ext := func(stream uint32) []byte {
		return must(frame.AppendExt(nil, stream, frame.FlagIgnore, 0x7000_0001, nil, []byte("x")))
	}
	for _, tc := range []struct {
		name    string
		f       []byte
		counted bool
	}{
		{"REQUEST_RESPONSE", must(frame.AppendRequestResponse(nil, 3, 0, nil, []byte("q"))), true},
		{"REQUEST_FNF", must(frame.AppendRequestFNF(nil, 3, 0, nil, []byte("q"))), true},
		{"REQUEST_STREAM", must(frame.AppendRequestStream(nil, 3, 0, 1, nil, []byte("q"))), true},
		{"REQUEST_CHANNEL", must(frame.AppendRequestChannel(nil, 3, 0, 1, nil, []byte("q"))), true},
		{"REQUEST_N", must(frame.AppendRequestN(nil, 1, 5)), true},
		{"CANCEL", must(frame.AppendCancel(nil, 1)), true},
		{"PAYLOAD", must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, []byte("p"))), true},
		{"ERROR on a stream", must(frame.AppendError(nil, 1, frame.ErrorCodeApplicationError, "e")), true},
		{"EXT on a stream", ext(1), true},
		{"EXT on an unknown stream", ext(99), true},
		{"byte-credits grant on a stream", extFrame(1, ExtRequestBytes, 10), true},
		{"KEEPALIVE", must(frame.AppendKeepalive(nil, false, 0, nil)), false},
		{"LEASE", must(frame.AppendLease(nil, 1000, 1, nil)), false},
		{"METADATA_PUSH", must(frame.AppendMetadataPush(nil, []byte("m"))), false},
		{"EXT on stream 0", ext(0), false},
		{"ERROR on stream 0", must(frame.AppendError(nil, 0, frame.ErrorCodeConnectionClose, "bye")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := resumePair(t, Config{})
			if _, err := p.c.RequestChannel(p.now, 1, nil, []byte("x"), false); err != nil {
				t.Fatal(err)
			}
			p.pump()
			_, before := p.s.Positions()
			p.s.Receive(p.now, tc.f)
			_, after := p.s.Positions()
			want := before
			if tc.counted {
				want += uint64(len(tc.f))
			}
			if after != want {
				t.Fatalf("received position %d -> %d, want %d (counted: %v)", before, after, want, tc.counted)
			}
		})
	}

	// Sending: KEEPALIVE and METADATA_PUSH leave the client's position
	// alone, a byte-credits grant moves it by its size and is retained.
	p := newPair(t, Config{ResumeToken: []byte("tok"), ByteCredits: 100}, Config{Resume: true, ByteCredits: 100})
	sid := id(p.c.RequestStream(p.now, 10, nil, []byte("q")))
	p.pump()
	sent, _ := p.c.Positions()
	ok(t, p.c.MetadataPush([]byte("m")))
	p.c.Tick(DefaultKeepaliveInterval) // a KEEPALIVE is due
	fs, _ := drain(t, p.c)
	if len(fs) != 2 {
		t.Fatalf("want METADATA_PUSH and KEEPALIVE, got %s", describe(fs))
	}
	if now, _ := p.c.Positions(); now != sent {
		t.Fatalf("stream-0 frames moved the sent position %d -> %d", sent, now)
	}
	retained, _ := p.c.RetainedBytes()
	ok(t, p.c.RequestBytes(sid, 10))
	fs, _ = drain(t, p.c)
	if now, _ := p.c.Positions(); len(fs) != 1 || now != sent+uint64(len(fs[0])) {
		t.Fatalf("a grant moved the sent position %d -> %d, frames %s", sent, now, describe(fs))
	}
	if r, _ := p.c.RetainedBytes(); r != retained+frame.LengthPrefixSize+len(fs[0]) {
		t.Fatalf("retained %d -> %d bytes: the grant was not kept for replay", retained, r)
	}
}
