package conn

// Deterministic simulation: a client and a server machine wired back to
// back through an in-memory pipe (TCP semantics: in order, no loss, plus
// an optional cut), driven by a seeded scheduler that interleaves
// application commands, ticks and frame delivery. Model applications on
// both sides check the invariants after every step:
//
//   - every stream an application opens or accepts ends exactly once
//     (completion both ways, cancel, error or connection close), and no
//     event arrives for a stream after its end;
//   - credits are never exceeded: a receiver never gets more elements than
//     it granted, the machine refuses a sender beyond what was granted, and
//     no stream is ever failed with a local ERROR[INVALID] (two correct
//     ends never break flow control);
//   - memory stays bounded: live streams <= MaxStreams, reassembly bytes
//     <= MaxReassemblyBytes; at the end both machines hold nothing;
//   - payload bytes arrive intact, through fragmentation and reassembly;
//   - with the byte-credits extension (on both ends, or on one only, which
//     must then behave as plain RSocket): a governed stream's receiver never
//     gets an element while the sender's byte credit is not positive, and
//     the machine refuses a sender without byte credits.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

var simSeeds = flag.Int("sim.seeds", 1000, "number of seeds TestSimulation runs")

// simTrustMachine makes the model application accept whatever the machine
// allows, so that only the end-to-end invariants (checked at the receiver)
// can notice a sender that breaks flow control.
var simTrustMachine bool

type simStream struct {
	id          uint32
	kind        Interaction
	requester   bool
	sendOpen    bool
	recvOpen    bool
	sendCredits int64 // granted to us by the peer (initial N, REQUEST_N events)
	sentNext    int64
	recvGranted int64 // granted by us
	recvNext    int64
	// Byte credits (when governed): what we may still send, and what the
	// peer may still send us, as the model counts them.
	gov       bool
	sendBytes int64
	recvBytes int64
}

type simApp struct {
	name     string
	m        *Machine
	peer     *simApp
	rng      *rand.Rand
	streams  map[uint32]*simStream
	ended    map[uint32]bool
	closed   bool
	opened   int
	finished int
	cfg      Config
	// inflight are the requests/payloads this side sent, by stream, in
	// order, for the peer to check byte-exact delivery.
	sentData map[uint32][][]byte
	// Lease (when the client's SETUP carried L): the lease received from
	// the peer, and the requests granted to / accepted from the peer.
	leaseMode     bool
	leaseHave     bool
	leaseLeft     int64
	leaseExpiry   time.Duration
	grantedTotal  int64
	acceptedTotal int64
	// Byte credits: bothOn when both ends enabled the extension; extSeen:
	// the server sent its answer (server app) or the client received it
	// (client app), which decides whether the server's streams are governed.
	bothOn  bool
	extSeen bool
}

// simStats shows what the seeds exercised (logged by TestSimulation).
var simStats struct {
	frames, fragments, refusedNoCredits, refusedNoLease, cuts, stalls, closedRuns, keepaliveTimeouts int
	refusedNoBytes, byteGrants, governedStreams, byteRuns                                            int
	events                                                                                           [EventClosed + 1]int
}

type sim struct {
	rng      *rand.Rand
	now      time.Duration
	c, s     *simApp
	toS, toC [][]byte
	cut      bool
	stalled  bool // server-to-client frames stay queued: a half-open connection
	log      []string
}

func (x *sim) logf(format string, args ...any) {
	x.log = append(x.log, fmt.Sprintf("%v ", x.now)+fmt.Sprintf(format, args...))
	if len(x.log) > 60 {
		x.log = x.log[1:]
	}
}

func (x *sim) fail(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	var b bytes.Buffer
	for _, l := range x.log {
		b.WriteString("  " + l + "\n")
	}
	return fmt.Errorf("%s\nlast steps:\n%s", msg, b.String())
}

// runSim runs one seeded simulation and returns the first broken invariant.
func runSim(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	frameSize := []int{128, 200, 300, frame.MaxFrameSize}[rng.IntN(4)]
	base := Config{
		KeepaliveInterval:  time.Duration(100+rng.IntN(900)) * time.Millisecond,
		MaxLifetime:        10 * time.Second,
		MaxFrameSize:       frameSize,
		MaxStreams:         2 + rng.IntN(10),
		MaxPayloadSize:     4096,
		MaxReassemblyBytes: 4096 * 4,
	}
	x := &sim{rng: rng}
	leaseMode := rng.IntN(5) == 0
	// Byte credits: on both ends, on one end only (the other is a plain
	// RSocket peer), or off.
	byteMode := rng.IntN(6)
	window := uint32([]int{1, 100, 1000, 5000}[rng.IntN(4)])
	mk := func(name string, role Role) (*simApp, error) {
		cfg := base
		cfg.Role = role
		cfg.Lease = leaseMode // the server must support what the client asks
		if byteMode <= 1 || (byteMode == 2 && role == Client) || (byteMode == 3 && role == Server) {
			cfg.ByteCredits = window + uint32(role) // the two windows differ
		}
		m, err := New(cfg, 0)
		if err != nil {
			return nil, err
		}
		return &simApp{name: name, m: m, rng: rng, streams: map[uint32]*simStream{}, ended: map[uint32]bool{},
			cfg: cfg, sentData: map[uint32][][]byte{}}, nil
	}
	var err error
	if x.c, err = mk("client", Client); err != nil {
		return err
	}
	if x.s, err = mk("server", Server); err != nil {
		return err
	}
	x.c.peer, x.s.peer = x.s, x.c
	x.c.leaseMode = leaseMode
	x.c.bothOn = byteMode <= 1
	x.s.bothOn = x.c.bothOn
	if x.c.bothOn {
		simStats.byteRuns++
	}
	if err := x.c.m.Start(0); err != nil {
		return err
	}
	if err := x.collect(); err != nil {
		return err
	}
	cutAt, stallAt := -1, -1
	switch rng.IntN(8) {
	case 0, 1:
		cutAt = rng.IntN(400)
	case 2:
		stallAt = rng.IntN(400)
	}
	steps := 200 + rng.IntN(300)
	for step := 0; step < steps; step++ {
		if step == stallAt {
			x.logf("STALL server to client")
			simStats.stalls++
			x.stalled = true
		}
		if step == cutAt {
			x.logf("CUT")
			simStats.cuts++
			x.cut = true
			x.toS, x.toC = nil, nil
			x.c.m.TransportClosed(errors.New("cut"))
			x.s.m.TransportClosed(errors.New("cut"))
		} else {
			switch r := rng.IntN(100); {
			case r < 35:
				x.deliver(true)
			case r < 70:
				x.deliver(false)
			case r < 80:
				if x.stalled {
					x.now += time.Duration(rng.IntN(2000)) * time.Millisecond
				} else {
					x.now += time.Duration(rng.IntN(50)) * time.Millisecond
				}
				x.c.m.Tick(x.now)
				x.s.m.Tick(x.now)
			default:
				a := x.c
				if rng.IntN(2) == 0 {
					a = x.s
				}
				if err := x.command(a); err != nil {
					return err
				}
			}
		}
		if err := x.collect(); err != nil {
			return err
		}
	}
	// Wind down: deliver everything, end every stream, deliver again.
	if err := x.quiesce(); err != nil {
		return err
	}
	if x.stalled && !x.c.closed {
		// Nothing reaches the client any more: past the max lifetime it
		// must give up, and tell the server, which must close too.
		x.now += base.MaxLifetime
		x.c.m.Tick(x.now)
		if err := x.collect(); err != nil {
			return err
		}
		if err := x.quiesce(); err != nil {
			return err
		}
		if !x.c.closed || !x.s.closed {
			return x.fail("half-open connection not closed after the max lifetime: client closed %v, server closed %v", x.c.closed, x.s.closed)
		}
	}
	for _, a := range []*simApp{x.c, x.s} {
		ids := make([]uint32, 0, len(a.streams))
		for id := range a.streams {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			st := a.streams[id]
			if st == nil {
				continue // ended by an earlier step of this loop
			}
			var err error
			if st.requester && st.kind != RequestChannel {
				err = a.m.Cancel(id)
				a.end(id)
			} else if st.requester || !st.sendOpen {
				err = a.m.Cancel(id)
				if st.requester {
					a.end(id)
				} else {
					st.recvOpen = false
					a.maybeEnd(st)
				}
			} else {
				err = a.m.SendError(id, frame.ErrorCodeApplicationError, "wind down")
				a.end(id)
			}
			if err != nil {
				return x.fail("%s: ending stream %d: %v", a.name, id, err)
			}
			if err := x.collect(); err != nil {
				return err
			}
		}
		if err := x.quiesce(); err != nil {
			return err
		}
	}
	for _, a := range []*simApp{x.c, x.s} {
		if len(a.streams) != 0 || a.m.NumStreams() != 0 || a.m.ReassemblyBytes() != 0 {
			return x.fail("%s: after wind-down: app streams %d, machine streams %d, reassembly %d bytes",
				a.name, len(a.streams), a.m.NumStreams(), a.m.ReassemblyBytes())
		}
		if a.opened != a.finished {
			return x.fail("%s: %d streams opened, %d ended", a.name, a.opened, a.finished)
		}
	}
	return nil
}

func (x *sim) quiesce() error {
	for i := 0; i < 100000 && (len(x.toS) > 0 || (len(x.toC) > 0 && !x.stalled)); i++ {
		x.deliver(len(x.toS) > 0)
		if err := x.collect(); err != nil {
			return err
		}
	}
	return nil
}

func (x *sim) deliver(toServer bool) {
	q, m := &x.toC, x.c.m
	if toServer {
		q, m = &x.toS, x.s.m
	}
	if len(*q) == 0 || (!toServer && x.stalled) {
		return
	}
	f := (*q)[0]
	*q = (*q)[1:]
	simStats.frames++
	if !toServer && isWindowExt(f) && !x.c.extSeen {
		// The client's streams opened before the answer become governed
		// now (the server governed them from its start).
		x.c.extSeen = true
		for _, st := range x.c.streams {
			if st.requester {
				x.c.govern(st, true)
			}
		}
	}
	if h, _ := frame.ParseHeader(f); h.Has(frame.FlagFollows) && (h.Type == frame.TypePayload || h.Type.IsRequest()) {
		simStats.fragments++
	}
	if h, err := frame.ParseHeader(f); err == nil {
		x.logf("deliver to %s: %s", map[bool]string{true: "server", false: "client"}[toServer], describe([][]byte{f}))
		_ = h
	}
	m.Receive(x.now, f)
}

// collect moves both machines' output into the pipe and the model apps,
// checking invariants.
func (x *sim) collect() error {
	for _, a := range []*simApp{x.c, x.s} {
		rd := a.m.Ready()
		for out := rd.Out; len(out) > 0; {
			f, rest, ok := NextFrame(out)
			if !ok {
				return x.fail("%s: partial frame in Out", a.name)
			}
			if len(f) > a.cfg.MaxFrameSize {
				return x.fail("%s: frame of %d bytes > MaxFrameSize %d", a.name, len(f), a.cfg.MaxFrameSize)
			}
			if _, err := frame.Validate(f); err != nil {
				return x.fail("%s sent an invalid frame: %v", a.name, err)
			}
			out = rest
			if a == x.s && isWindowExt(f) {
				x.s.extSeen = true
			}
			if x.cut {
				continue
			}
			if a == x.c {
				x.toS = append(x.toS, slices.Clone(f))
			} else {
				x.toC = append(x.toC, slices.Clone(f))
			}
		}
		for _, ev := range rd.Events {
			x.logf("%s event: %s", a.name, ev)
			if err := x.event(a, ev); err != nil {
				return err
			}
		}
		a.m.Advance()
		if a.m.NumStreams() > a.cfg.MaxStreams {
			return x.fail("%s: %d streams > MaxStreams %d", a.name, a.m.NumStreams(), a.cfg.MaxStreams)
		}
		if a.m.ReassemblyBytes() > a.cfg.MaxReassemblyBytes {
			return x.fail("%s: reassembly %d > %d", a.name, a.m.ReassemblyBytes(), a.cfg.MaxReassemblyBytes)
		}
	}
	return nil
}

func (a *simApp) end(id uint32) {
	delete(a.streams, id)
	a.ended[id] = true
	a.finished++
}

func (a *simApp) maybeEnd(st *simStream) {
	if !st.sendOpen && !st.recvOpen {
		a.end(st.id)
	}
}

func (x *sim) checkData(a *simApp, id uint32, md, data []byte) error {
	q := a.peer.sentData[id]
	if len(q) == 0 {
		return x.fail("%s: stream %d: element nobody sent", a.name, id)
	}
	want := q[0]
	a.peer.sentData[id] = q[1:]
	got := append(append([]byte{}, md...), data...)
	if !bytes.Equal(got, want) {
		return x.fail("%s: stream %d: element of %d bytes differs from the %d sent", a.name, id, len(got), len(want))
	}
	return nil
}

func (x *sim) event(a *simApp, ev Event) error {
	if a.closed {
		return x.fail("%s: event after Closed: %s", a.name, ev)
	}
	simStats.events[ev.Kind]++
	if ev.Kind == EventClosed {
		simStats.closedRuns++
		if errors.Is(ev.Err, ErrKeepaliveTimeout) {
			simStats.keepaliveTimeouts++
		}
		a.closed = true
		if len(a.streams) != 0 {
			return x.fail("%s: Closed with %d streams not failed", a.name, len(a.streams))
		}
		return nil
	}
	switch ev.Kind {
	case EventSetup:
		a.leaseMode = ev.Setup.Lease
		return nil
	case EventMetadataPush:
		return nil
	case EventLease:
		if !a.leaseMode {
			return x.fail("%s: LEASE event without lease negotiated", a.name)
		}
		a.leaseHave, a.leaseLeft, a.leaseExpiry = true, int64(ev.N), x.now+ev.TTL
		return nil
	}
	id := ev.StreamID
	if a.ended[id] {
		return x.fail("%s: event on ended stream %d: %s", a.name, id, ev)
	}
	if ev.Kind == EventRequest {
		if a.leaseMode {
			a.acceptedTotal++
			if a.acceptedTotal > a.grantedTotal {
				return x.fail("%s: accepted %d requests, leases granted only %d", a.name, a.acceptedTotal, a.grantedTotal)
			}
		}
		if a.streams[id] != nil {
			return x.fail("%s: request on live stream %d", a.name, id)
		}
		if err := x.checkData(a, id, ev.Metadata, ev.Data); err != nil {
			return err
		}
		if ev.Interaction == FireAndForget {
			a.ended[id] = true
			return nil
		}
		a.opened++
		st := &simStream{id: id, kind: ev.Interaction, sendOpen: true}
		switch ev.Interaction {
		case RequestResponse:
			st.sendCredits = 1
		case RequestStream:
			st.sendCredits = int64(ev.N)
		case RequestChannel:
			st.sendCredits = int64(ev.N)
			st.recvOpen = !ev.Complete
		}
		// The client's requests are governed when both ends have the
		// extension; the server's only when they left after its answer.
		a.govern(st, a == x.s || a.extSeen)
		a.streams[id] = st
		return nil
	}
	st := a.streams[id]
	if st == nil {
		return x.fail("%s: %s on unknown stream", a.name, ev)
	}
	switch ev.Kind {
	case EventPayload:
		if !st.recvOpen {
			return x.fail("%s: payload on a closed half: %s", a.name, ev)
		}
		if ev.Next {
			st.recvNext++
			if st.recvNext > st.recvGranted {
				return x.fail("%s: stream %d: element %d beyond the %d granted", a.name, id, st.recvNext, st.recvGranted)
			}
			if st.gov {
				if st.recvBytes <= 0 {
					return x.fail("%s: stream %d: element while the sender had %d byte credits", a.name, id, st.recvBytes)
				}
				st.recvBytes -= int64(len(ev.Metadata) + len(ev.Data))
			}
			if err := x.checkData(a, id, ev.Metadata, ev.Data); err != nil {
				return err
			}
		}
		if ev.Complete {
			st.recvOpen = false
			a.maybeEnd(st)
		}
	case EventRequestN:
		if !st.sendOpen {
			return x.fail("%s: REQUEST_N on a closed half", a.name)
		}
		st.sendCredits = min(st.sendCredits+int64(ev.N), st.sentNext+frame.MaxRequestN)
		if ev.Bytes > 0 {
			if !st.gov {
				return x.fail("%s: byte credits on stream %d, which is not governed", a.name, id)
			}
			st.sendBytes += int64(ev.Bytes)
		}
	case EventCancel:
		if st.requester {
			st.sendOpen = false
			a.maybeEnd(st)
		} else {
			a.end(id)
		}
	case EventError:
		if ev.Local && ev.Code == frame.ErrorCodeInvalid {
			return x.fail("%s: stream %d failed locally with INVALID between two correct ends: %s", a.name, id, ev.Message)
		}
		a.end(id)
	default:
		return x.fail("%s: unexpected event %s", a.name, ev)
	}
	return nil
}

func (x *sim) payload() (md, data []byte) {
	r := x.rng
	switch r.IntN(3) {
	case 0:
		md = nil
	case 1:
		md = []byte{}
	default:
		md = make([]byte, r.IntN(600))
	}
	data = make([]byte, r.IntN([]int{8, 64, 1500}[r.IntN(3)]))
	for i := range md {
		md[i] = byte(r.Uint32())
	}
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	return md, data
}

// command issues one random application command and checks the machine's
// answer against the model: the model knows exactly what must be allowed.
func (x *sim) command(a *simApp) error {
	r := x.rng
	if a.closed {
		if _, err := a.m.RequestResponse(x.now, nil, nil); !errors.Is(err, ErrClosed) {
			return x.fail("%s: request after close: %v", a.name, err)
		}
		return nil
	}
	if a == x.s && a.m.state != stateOpen {
		return nil // server before SETUP
	}
	live := make([]uint32, 0, len(a.streams))
	for id := range a.streams {
		live = append(live, id)
	}
	slices.Sort(live)
	if a.leaseMode && r.IntN(10) == 0 && !x.cut {
		// A rogue requester: a REQUEST_FNF written straight into the pipe,
		// past the machine's own lease check. The peer's responder must
		// reject it (ERROR[REJECTED]) unless its lease allows it.
		id := a.m.nextID
		a.m.nextID += 2
		data := []byte("rogue")
		f := must(frame.AppendRequestFNF(nil, id, 0, nil, data))
		if a == x.c {
			x.toS = append(x.toS, f)
		} else {
			x.toC = append(x.toC, f)
		}
		a.sentData[id] = append(a.sentData[id], data)
		x.logf("%s: rogue REQUEST_FNF %d", a.name, id)
		return nil
	}
	if a.leaseMode && r.IntN(8) == 0 {
		ttl := time.Duration(100+r.IntN(3000)) * time.Millisecond
		count := uint32(r.IntN(6))
		err := a.m.SendLease(x.now, ttl, count)
		x.logf("%s: SendLease(%v, %d) -> %v", a.name, ttl, count, err)
		if err != nil {
			return x.fail("%s: SendLease: %v", a.name, err)
		}
		a.grantedTotal += int64(count)
		return nil
	}
	op := r.IntN(10)
	if len(live) == 0 || op < 3 {
		kind := Interaction(1 + r.IntN(4))
		n := uint32(1 + r.IntN(4))
		if r.IntN(20) == 0 {
			n = frame.MaxRequestN
		}
		md, data := x.payload()
		complete := kind == RequestChannel && r.IntN(4) == 0
		full := a.m.NumStreams() >= a.cfg.MaxStreams
		var id uint32
		var err error
		switch kind {
		case RequestResponse:
			id, err = a.m.RequestResponse(x.now, md, data)
		case FireAndForget:
			id, err = a.m.RequestFNF(x.now, md, data)
		case RequestStream:
			id, err = a.m.RequestStream(x.now, n, md, data)
		case RequestChannel:
			id, err = a.m.RequestChannel(x.now, n, md, data, complete)
		}
		x.logf("%s: %s n=%d (%d+%d bytes) -> %d %v", a.name, kind, n, len(md), len(data), id, err)
		if full {
			if !errors.Is(err, ErrTooManyStreams) {
				return x.fail("%s: request with %d streams: %v", a.name, a.m.NumStreams(), err)
			}
			return nil
		}
		if a.leaseMode {
			if !a.leaseHave || a.leaseLeft == 0 || x.now >= a.leaseExpiry {
				if !errors.Is(err, ErrNoLease) {
					return x.fail("%s: request without a valid lease: %v", a.name, err)
				}
				simStats.refusedNoLease++
				return nil
			}
			a.leaseLeft--
		}
		if err != nil {
			return x.fail("%s: request: %v", a.name, err)
		}
		a.sentData[id] = append(a.sentData[id], append(append([]byte{}, md...), data...))
		if kind == FireAndForget {
			return nil
		}
		a.opened++
		st := &simStream{id: id, kind: kind, requester: true, recvOpen: true}
		switch kind {
		case RequestResponse:
			st.recvGranted = 1
		case RequestStream:
			st.recvGranted = int64(n)
		case RequestChannel:
			st.recvGranted = int64(n)
			st.sendOpen = !complete
		}
		a.govern(st, a.extSeen)
		a.streams[id] = st
		return nil
	}
	id := live[r.IntN(len(live))]
	st := a.streams[id]
	if a.cfg.ByteCredits > 0 && r.IntN(4) == 0 {
		n := uint32(1 + r.IntN(2000))
		err := a.m.RequestBytes(id, n)
		x.logf("%s: RequestBytes(%d, %d) gov=%v -> %v", a.name, id, n, st.gov, err)
		if want := st.gov && st.recvOpen; want != (err == nil) {
			return x.fail("%s: RequestBytes on stream %d (governed %v, recv open %v): %v", a.name, id, st.gov, st.recvOpen, err)
		}
		if err == nil {
			st.recvBytes += int64(n)
			simStats.byteGrants++
		}
		return nil
	}
	switch op {
	case 3, 4, 5: // an element, sometimes beyond credits on purpose
		md, data := x.payload()
		complete := r.IntN(5) == 0
		err := a.m.SendPayload(id, md, data, true, complete)
		x.logf("%s: SendPayload(%d, complete=%v) credits %d/%d -> %v", a.name, id, complete, st.sentNext, st.sendCredits, err)
		switch {
		case !st.sendOpen:
			if !errors.Is(err, ErrNotAllowed) {
				return x.fail("%s: send on a closed half: %v", a.name, err)
			}
		case st.sentNext >= st.sendCredits && !(simTrustMachine && mutation.skipSendCredits):
			simStats.refusedNoCredits++
			if !errors.Is(err, ErrNoCredits) {
				return x.fail("%s: stream %d: send beyond the %d credits granted was not refused (%v)", a.name, id, st.sendCredits, err)
			}
		case st.gov && st.sendBytes <= 0 && !(simTrustMachine && mutation.skipByteCredits):
			simStats.refusedNoBytes++
			if !errors.Is(err, ErrNoCredits) {
				return x.fail("%s: stream %d: send with %d byte credits was not refused (%v)", a.name, id, st.sendBytes, err)
			}
		case err != nil:
			return x.fail("%s: send: %v", a.name, err)
		default:
			st.sentNext++
			st.sendBytes -= int64(len(md) + len(data))
			a.sentData[id] = append(a.sentData[id], append(append([]byte{}, md...), data...))
			if complete || st.kind == RequestResponse {
				st.sendOpen = false
				a.maybeEnd(st)
			}
		}
	case 6:
		err := a.m.Complete(id)
		x.logf("%s: Complete(%d) -> %v", a.name, id, err)
		if st.sendOpen != (err == nil) {
			return x.fail("%s: complete with send half open=%v: %v", a.name, st.sendOpen, err)
		}
		if err == nil {
			st.sendOpen = false
			a.maybeEnd(st)
		}
	case 7:
		n := uint32(1 + r.IntN(3))
		err := a.m.RequestN(id, n)
		x.logf("%s: RequestN(%d, %d) -> %v", a.name, id, n, err)
		if want := st.recvOpen && st.kind != RequestResponse; want != (err == nil) {
			return x.fail("%s: RequestN with recv open=%v: %v", a.name, st.recvOpen, err)
		}
		if err == nil {
			st.recvGranted = min(st.recvGranted+int64(n), st.recvNext+frame.MaxRequestN)
		}
	case 8:
		err := a.m.Cancel(id)
		x.logf("%s: Cancel(%d) -> %v", a.name, id, err)
		allowed := st.requester || (st.kind == RequestChannel && st.recvOpen)
		if allowed != (err == nil) {
			return x.fail("%s: cancel allowed=%v: %v", a.name, allowed, err)
		}
		if err == nil {
			if st.requester {
				a.end(id)
			} else {
				st.recvOpen = false
				a.maybeEnd(st)
			}
		}
	case 9:
		err := a.m.SendError(id, frame.ErrorCodeApplicationError, "app")
		x.logf("%s: SendError(%d) -> %v", a.name, id, err)
		allowed := !st.requester || st.kind == RequestChannel
		if allowed != (err == nil) {
			return x.fail("%s: error allowed=%v: %v", a.name, allowed, err)
		}
		if err == nil {
			a.end(id)
		}
	}
	return nil
}

// TestSimulation runs -sim.seeds seeded simulations (default 1,000).
func TestSimulation(t *testing.T) {
	for seed := uint64(1); seed <= uint64(*simSeeds); seed++ {
		if err := runSim(seed); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	var evs []string
	for k, n := range simStats.events {
		if n > 0 {
			evs = append(evs, fmt.Sprintf("%s=%d", EventKind(k), n))
		}
	}
	t.Logf("%d seeds: %d frames delivered (%d fragments with F), %d sends refused for credits, %d requests refused for lease, %d cuts, %d stalls, %d Closed events (%d keepalive timeouts); events %s",
		*simSeeds, simStats.frames, simStats.fragments, simStats.refusedNoCredits, simStats.refusedNoLease, simStats.cuts, simStats.stalls,
		simStats.closedRuns, simStats.keepaliveTimeouts, strings.Join(evs, " "))
	t.Logf("byte credits: %d runs with both ends on, %d governed streams, %d sends refused for byte credits, %d RequestBytes",
		simStats.byteRuns, simStats.governedStreams, simStats.refusedNoBytes, simStats.byteGrants)
}

// TestSimulationCatchesMutations switches off one guarantee at a time and
// checks that some seed among the first 200 fails: the simulation would
// notice if the guarantee were lost.
func TestSimulationCatchesMutations(t *testing.T) {
	for _, mu := range []struct {
		name string
		flag *bool
	}{
		{"SendPayload ignores credits", &mutation.skipSendCredits},
		{"SendPayload ignores credits, model trusts the machine", &mutation.skipSendCredits},
		{"responder keeps its stream after CANCEL", &mutation.keepOnCancel},
		{"silent connection never times out", &mutation.ignoreLifetime},
		{"responder ignores the lease it sent", &mutation.ignoreLease},
		{"SendPayload ignores byte credits", &mutation.skipByteCredits},
		{"SendPayload ignores byte credits, model trusts the machine", &mutation.skipByteCredits},
	} {
		t.Run(mu.name, func(t *testing.T) {
			*mu.flag = true
			simTrustMachine = strings.Contains(mu.name, "trusts")
			defer func() { *mu.flag, simTrustMachine = false, false }()
			for seed := uint64(1); seed <= 200; seed++ {
				if err := runSim(seed); err != nil {
					first, _, _ := bytes.Cut([]byte(err.Error()), []byte("\n"))
					t.Logf("caught by seed %d: %s", seed, first)
					return
				}
			}
			t.Fatal("no seed caught the mutation")
		})
	}
}

// govern puts a model stream under byte credits when the extension governs
// it: both ends on, a stream or channel, and (for the server's streams)
// opened after the server's answer, which cond says.
func (a *simApp) govern(st *simStream, cond bool) {
	if !a.bothOn || !cond || (st.kind != RequestStream && st.kind != RequestChannel) {
		return
	}
	st.gov = true
	st.sendBytes = int64(a.peer.cfg.ByteCredits)
	st.recvBytes = int64(a.cfg.ByteCredits)
	simStats.governedStreams++
}

// isWindowExt reports whether f is the extension's EXT on stream 0.
func isWindowExt(f []byte) bool {
	e, err := frame.ParseExt(f)
	return err == nil && e.StreamID == 0 && e.ExtendedType == ExtByteCreditsWindow
}
