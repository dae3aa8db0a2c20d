package conn

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

type connState uint8

const (
	stateNew    connState = iota // client before Start; server before SETUP
	stateOpen                    // SETUP sent (client) or accepted (server)
	stateClosed                  // terminal: everything is ignored
)

// Machine is one end of an RSocket connection. It is not safe for
// concurrent use: one driver goroutine calls every method.
type Machine struct {
	cfg   Config
	state connState

	// established (client): a frame other than ERROR on stream 0 arrived,
	// so SETUP was accepted; SETUP errors are ignored from then on.
	established bool
	draining    bool  // ERROR[CONNECTION_CLOSE] sent or received: no new streams, close when none is left
	drainErr    error // the reason EventClosed will carry after draining

	streams map[uint32]*stream
	// streamsVersion changes whenever a stream opens or is freed
	// (ResumeCursor): a persisted session rewrites its list of open
	// streams only then.
	streamsVersion uint64
	spare          []*stream // freed streams for reuse (newStream)
	// nextID is the next id of a stream we open. Invariant: our ids are
	// never reused (Protocol.md "Stream Sequences and Lifetimes"); the
	// peer's may arrive in any order (see newPeerID).
	nextID  uint32
	idsDone bool

	// asmBytes: bytes held by all reassemblies. Invariant:
	// asmBytes <= cfg.MaxReassemblyBytes.
	asmBytes int
	// droppedFNF counts fire-and-forget requests dropped for exceeding
	// MaxPayloadSize (OversizeFNFDropped).
	droppedFNF uint64

	// Time, all monotonic values given by the driver.
	keepaliveInterval time.Duration
	maxLifetime       time.Duration
	lastReceived      time.Duration
	nextKeepalive     time.Duration

	// Resume positions: bytes of frames on streams (countsForResume).
	sentPos, recvPos uint64

	rs    resumeState // resume.go
	lease lease
	bc    byteExt       // byte-credits extension (bytecredits.go)
	now   time.Duration // the latest time an input brought

	out    []byte
	lent   []Lent // data not copied into out (SendPayloadLent)
	events []Event
	arena  []byte // copies of inbound bytes referenced by events
	err    error  // why closed
}

// New returns a machine; now is the driver's monotonic clock.
func New(cfg Config, now time.Duration) (*Machine, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Machine{cfg: cfg, streams: make(map[uint32]*stream), lastReceived: now}
	if cfg.Role == Client {
		m.nextID = 1
		if cfg.ResumeToken != nil {
			m.rs.on, m.rs.token = true, append([]byte{}, cfg.ResumeToken...)
		}
		m.keepaliveInterval = cfg.KeepaliveInterval
		m.maxLifetime = cfg.MaxLifetime
		// SETUP cannot be fragmented: it must fit MaxFrameSize.
		b, err := frame.AppendSetup(nil, m.setupView())
		if err != nil {
			return nil, fmt.Errorf("rsocket/conn: SETUP: %w", err)
		}
		if len(b) > cfg.MaxFrameSize {
			return nil, fmt.Errorf("rsocket/conn: SETUP of %d bytes exceeds Config.MaxFrameSize %d", len(b), cfg.MaxFrameSize)
		}
	} else {
		m.nextID = 2
	}
	return m, nil
}

// setupView is the client's SETUP.
func (m *Machine) setupView() frame.Setup {
	var flags frame.Flags
	if m.cfg.Lease {
		flags |= frame.FlagLease
	}
	return frame.Setup{
		Header:            frame.Header{Flags: flags},
		MajorVersion:      frame.ProtocolMajor,
		MinorVersion:      frame.ProtocolMinor,
		KeepaliveInterval: uint32(m.cfg.KeepaliveInterval / time.Millisecond),
		MaxLifetime:       uint32(m.cfg.MaxLifetime / time.Millisecond),
		MetadataMIME:      []byte(m.cfg.MetadataMIME),
		DataMIME:          []byte(m.cfg.DataMIME),
		Metadata:          m.cfg.SetupMetadata,
		Data:              m.cfg.SetupData,
		ResumeToken:       m.rs.token,
	}
}

// Start queues the client's SETUP. A server needs no Start.
func (m *Machine) Start(now time.Duration) error {
	if m.cfg.Role != Client || m.state != stateNew {
		return fmt.Errorf("%w: Start is for a new client", ErrNotAllowed)
	}
	s := m.setupView()
	at := len(m.out)
	m.out = frame.ReserveLengthPrefix(m.out)
	out, err := frame.AppendSetup(m.out, s)
	if err != nil {
		m.out = m.out[:at]
		return fmt.Errorf("%w: SETUP: %v", ErrInvalidArgument, err)
	}
	m.out = out
	if err := frame.SetLengthPrefix(m.out, at); err != nil {
		m.out = m.out[:at]
		return fmt.Errorf("%w: SETUP: %v", ErrInvalidArgument, err)
	}
	if m.cfg.ByteCredits > 0 {
		// The offer must be the very next frame: the server decides on the
		// frame after SETUP.
		m.emitExtU32(0, ExtByteCreditsWindow, m.cfg.ByteCredits)
		m.bc.offered = true
	}
	m.state = stateOpen
	m.lease.enabled = m.cfg.Lease
	m.now = now
	m.lastReceived = now
	m.nextKeepalive = now + m.keepaliveInterval
	return nil
}

// Ready returns the queued output. It stays valid until Advance.
func (m *Machine) Ready() Ready { return Ready{Out: m.out, Events: m.events, Lent: m.lent} }

// TakeOut hands the caller the buffer of the queued output (Ready().Out)
// instead of letting it copy it: the caller owns it from now on (a large
// one came from frame.GetBuf and may go back with frame.PutBuf once
// written), and the machine queues further output in a new buffer. A
// driver that queues output in pooled buffers takes a large payload's
// frames this way, so the payload is copied once, into its frame, and not
// once more into the driver's queue.
//
// Not with lent data pending (Ready().Lent): its offsets are into the
// output the caller copies piece by piece.
func (m *Machine) TakeOut() []byte {
	out := m.out
	m.out = nil
	return out
}

// HasReady reports whether Ready has anything.
func (m *Machine) HasReady() bool { return len(m.out) > 0 || len(m.events) > 0 }

// Advance releases what the last Ready returned.
func (m *Machine) Advance() {
	// Keep buffers for reuse, unless a huge payload grew them: a connection
	// that once moved 16 MiB should not hold 16 MiB forever.
	m.out = resetBuf(m.out, keepBuf)
	m.arena = resetBuf(m.arena, keepBuf)
	clear(m.lent) // the caller's memory: not ours to keep reachable
	m.lent = m.lent[:0]
	clear(m.events)
	if cap(m.events) > 1024 {
		m.events = nil
	} else {
		m.events = m.events[:0]
	}
}

// keepBuf is the largest output or arena buffer a machine keeps between
// batches; a larger one goes back to the pool of frame buffers
// (frame.PutBuf), where the next large payload of any connection takes
// it (growBuf) instead of allocating one. It was 1 MiB, without the pool:
// 100 connections that each once received a 1 MiB request kept 100 MiB
// of arenas no budget saw.
const keepBuf = frame.MinPooledBuf

func resetBuf(b []byte, keep int) []byte {
	if cap(b) > keep {
		frame.PutBuf(b) // nothing refers to it once Advance is called
		return nil
	}
	return b[:0]
}

// growBuf makes room for n more bytes in b, taking a pooled buffer when
// more than keepBuf come at once. The old b is left to the collector: events or
// a Ready of this batch may still refer to it.
func growBuf(b []byte, n int) []byte {
	// Only for a large payload: a buffer growing by small frames grows as
	// append does (see growOut in the driver).
	if cap(b)-len(b) >= n || len(b)+n <= keepBuf || n <= keepBuf {
		return b
	}
	return append(frame.GetBuf(max(len(b)+n, cap(b)+cap(b)/4)), b...) // a quarter more, as append
}

// Closed reports whether the connection is closed, and why.
func (m *Machine) Closed() (bool, error) { return m.state == stateClosed, m.err }

// Positions returns the resume positions: the bytes of resumable frames
// sent and received so far: every frame on a stream other than 0, EXT
// included (frame.IsResumable), length prefixes excluded.
func (m *Machine) Positions() (sent, received uint64) { return m.sentPos, m.recvPos }

// NumStreams returns the number of live streams (for tests and metrics).
func (m *Machine) NumStreams() int { return len(m.streams) }

// ReassemblyBytes returns the bytes held for inbound reassembly.
func (m *Machine) ReassemblyBytes() int { return m.asmBytes }

// NextDeadline returns when Tick must next be called; ok is false when no
// timer is needed (not started, or closed).
func (m *Machine) NextDeadline() (t time.Duration, ok bool) {
	if m.state == stateOpen && m.rs.link == linkDown {
		return m.rs.downSince + m.cfg.ResumeSessionLifetime, true
	}
	if m.state != stateOpen || m.maxLifetime == 0 {
		return 0, false
	}
	t = m.lastReceived + m.maxLifetime
	if m.cfg.Role == Client && m.rs.link == linkUp && m.nextKeepalive < t {
		t = m.nextKeepalive
	}
	if e, ok := m.leaseDeadline(); ok && e < t {
		t = e
	}
	return t, true
}

// Tick tells the machine the time is now: it sends a due KEEPALIVE and
// closes the connection when the max lifetime passed without a frame.
func (m *Machine) Tick(now time.Duration) {
	m.now = max(m.now, now)
	if m.state == stateOpen && m.rs.link == linkDown {
		if now-m.rs.downSince >= m.cfg.ResumeSessionLifetime {
			m.shutdown(fmt.Errorf("%w: not resumed within %v", ErrResumeExpired, m.cfg.ResumeSessionLifetime),
				frame.ErrorCodeConnectionError, "resume session expired")
		}
		return
	}
	if m.state != stateOpen || m.maxLifetime == 0 {
		return
	}
	m.tickLease(now)
	if m.rs.link == linkResuming {
		// No RESUME_OK within the max lifetime: try another transport
		// (rsocket-java's client waits forever here).
		if now-m.lastReceived >= m.maxLifetime {
			m.disconnect(errors.New("rsocket/conn: no RESUME_OK within the max lifetime"))
		}
		return
	}
	if now-m.lastReceived >= m.maxLifetime && !mutation.ignoreLifetime {
		m.closeLocal(frame.ErrorCodeConnectionError,
			fmt.Sprintf("no frame received for %v (max lifetime %v)", now-m.lastReceived, m.maxLifetime), ErrKeepaliveTimeout)
		return
	}
	if m.cfg.Role == Client && now >= m.nextKeepalive {
		m.emitKeepalive(true, nil)
		m.nextKeepalive += m.keepaliveInterval
		if m.nextKeepalive <= now { // the driver was late: do not burst
			m.nextKeepalive = now + m.keepaliveInterval
		}
	}
}

// TransportClosed tells the machine the connection is gone (EOF, reset,
// write error). Every stream fails and EventClosed carries err.
func (m *Machine) TransportClosed(err error) {
	if m.state == stateClosed {
		return
	}
	if err == nil {
		err = errors.New("rsocket/conn: transport closed")
	}
	if m.rs.on && m.state == stateOpen {
		m.disconnect(err)
		return
	}
	m.shutdown(err, frame.ErrorCodeConnectionError, "connection lost: "+err.Error())
}

// Close sends ERROR[code] on stream 0 with message and closes: streams
// fail, EventClosed follows. Use ErrorCodeConnectionError normally,
// ErrorCodeRejectedSetup (server) to refuse a SETUP. ErrorCodeConnectionClose
// is graceful: new requests are refused (ErrDraining, ERROR[REJECTED] to
// the peer's) and EventClosed comes when the last stream ends.
func (m *Machine) Close(code frame.ErrorCode, message string) error {
	if m.state == stateClosed {
		return ErrClosed
	}
	if !code.IsConnectionScoped() {
		return fmt.Errorf("%w: %s is not a connection error code", ErrInvalidArgument, code)
	}
	if code == frame.ErrorCodeConnectionClose {
		// Graceful: the streams alive finish first ("Error Codes":
		// CONNECTION_CLOSE waits for outstanding streams).
		if m.draining {
			return ErrDraining
		}
		m.emitError(0, code, message)
		m.startDrain(&LocalError{Code: code, Message: message})
		return nil
	}
	m.closeLocal(code, message, nil)
	return nil
}

// startDrain refuses new streams from now on and closes once none is left.
func (m *Machine) startDrain(err error) {
	if !m.draining {
		m.draining, m.drainErr = true, err
	}
	if len(m.streams) == 0 {
		m.shutdown(m.drainErr, frame.ErrorCodeConnectionClose, "connection closed")
	}
}

// closeLocal sends ERROR on stream 0 and shuts down.
func (m *Machine) closeLocal(code frame.ErrorCode, msg string, cause error) {
	if m.state == stateClosed {
		return
	}
	m.emitError(0, code, msg)
	m.shutdown(&LocalError{Code: code, Message: msg, Err: cause}, frame.ErrorCodeConnectionError, msg)
}

// shutdown fails every stream the application knows, in id order (so
// runs are deterministic), frees everything and emits EventClosed.
func (m *Machine) shutdown(err error, code frame.ErrorCode, msg string) {
	m.state = stateClosed // first: free must not start a drain shutdown
	ids := make([]uint32, 0, len(m.streams))
	for id := range m.streams {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s := m.streams[id]
		if s.announced {
			m.events = append(m.events, Event{Kind: EventError, StreamID: id, Code: code, Message: msg, Local: true})
		}
		m.free(s)
	}
	m.err = err
	m.events = append(m.events, Event{Kind: EventClosed, Err: err})
}

// copyIn copies inbound bytes that an event will reference into the
// arena, keeping nil as nil (no metadata) and empty as empty. With
// Config.LendFrames it lends the frame's bytes instead (capped, so an
// append by the application cannot write into the next field).
func (m *Machine) copyIn(b []byte) []byte {
	if b == nil {
		return nil
	}
	if len(b) == 0 {
		return []byte{}
	}
	if m.cfg.LendFrames {
		return b[:len(b):len(b)]
	}
	at := len(m.arena)
	m.arena = append(growBuf(m.arena, len(b)), b...)
	return m.arena[at:len(m.arena):len(m.arena)]
}

// ---- output ----

// begin reserves a length prefix; finish patches it, counts the resume
// position, or rolls back on an encoding error.
func (m *Machine) finish(at int, out []byte, err error) error {
	if err != nil {
		m.out = m.out[:at]
		return err
	}
	m.out = out
	if err := frame.SetLengthPrefix(m.out, at); err != nil {
		m.out = m.out[:at]
		return err
	}
	f := m.out[at+frame.LengthPrefixSize:]
	h, _ := frame.ParseHeader(f)
	if countsForResume(h) {
		m.sentPos += uint64(len(f))
		if m.rs.on {
			m.retain(f)
		}
	}
	if m.rs.link != linkUp {
		// Not on the wire now: a resumable frame is replayed from the
		// retained buffer after RESUME_OK, anything else is moot.
		m.out = m.out[:at]
	}
	return nil
}

func (m *Machine) emitError(id uint32, code frame.ErrorCode, msg string) {
	// The message is for humans; cut it so the frame always fits.
	if max := m.cfg.MaxFrameSize - frame.FixedSize(frame.TypeError); len(msg) > max {
		msg = msg[:max]
	}
	at := len(m.out)
	m.out = frame.ReserveLengthPrefix(m.out)
	out, err := frame.AppendError(m.out, id, code, msg)
	_ = m.finish(at, out, err)
}

func (m *Machine) emitKeepalive(respond bool, data []byte) {
	if max := m.cfg.MaxFrameSize - frame.FixedSize(frame.TypeKeepalive); len(data) > max {
		data = data[:max]
	}
	at := len(m.out)
	m.out = frame.ReserveLengthPrefix(growBuf(m.out, frame.LengthPrefixSize+frame.FixedSize(frame.TypeKeepalive)+len(data)))
	var pos uint64
	if m.rs.on { // 0 means "resume not supported" to a peer
		pos = m.recvPos & frame.MaxPosition
	}
	out, err := frame.AppendKeepalive(m.out, respond, pos, data)
	_ = m.finish(at, out, err)
}

func (m *Machine) emitRequestN(id uint32, n uint32) {
	at := len(m.out)
	m.out = frame.ReserveLengthPrefix(m.out)
	out, err := frame.AppendRequestN(m.out, id, n)
	_ = m.finish(at, out, err)
}

func (m *Machine) emitCancel(id uint32) {
	at := len(m.out)
	m.out = frame.ReserveLengthPrefix(m.out)
	out, err := frame.AppendCancel(m.out, id)
	_ = m.finish(at, out, err)
}

// emitPayload writes a request (t a REQUEST_* type, n its initial N) or a
// PAYLOAD (t TypePayload), fragmenting it to cfg.MaxFrameSize: the first
// frame has type t, the rest are PAYLOAD fragments with F, metadata before
// data (Protocol.md "Fragmentation And Reassembly"). next and complete are
// the PAYLOAD's N and C (complete: C of a REQUEST_CHANNEL); C goes on the
// last fragment only.
func (m *Machine) emitPayload(t frame.Type, id uint32, n uint32, md, data []byte, next, complete bool) error {
	var tail frame.Flags // N and C, on the last frame
	if next || t != frame.TypePayload {
		tail |= frame.FlagNext
	}
	if complete {
		tail |= frame.FlagComplete
	}
	limit := m.cfg.MaxFrameSize
	// Room for the frames at once: a large payload would otherwise grow
	// the output by copies, each left to the collector.
	m.out = growBuf(m.out, len(md)+len(data)+((len(md)+len(data))/limit+1)*32)
	if frame.Size(t, md, data) <= limit {
		return m.emitOne(t, id, n, tail, md, data)
	}
	start := len(m.out)
	typ := t
	for {
		hasMD := md != nil
		room := frame.MaxFragmentPayload(typ, hasMD, limit)
		var fmd []byte
		if hasMD {
			k := min(len(md), room)
			fmd, md = md[:k:k], md[k:]
			room -= k
			if len(md) == 0 {
				md = nil
			}
		}
		k := min(len(data), room)
		fdata := data[:k:k]
		data = data[k:]
		last := md == nil && len(data) == 0
		var flags frame.Flags
		if !last {
			flags = frame.FlagFollows
		}
		if typ == frame.TypePayload && (next || t != frame.TypePayload) {
			flags |= frame.FlagNext
		}
		if last && complete {
			flags |= frame.FlagComplete
		}
		if err := m.emitOne(typ, id, n, flags, fmd, fdata); err != nil {
			m.out = m.out[:start]
			return err
		}
		if last {
			return nil
		}
		typ = frame.TypePayload
	}
}

// mayLend reports whether a PAYLOAD's data may stay out of the output
// (SendPayloadLent): large enough to be worth it, one frame, and no
// resume, whose retained frames need their bytes.
func (m *Machine) mayLend(md, data []byte) bool {
	return len(data) >= MinLent && !m.rs.on && frame.Size(frame.TypePayload, md, data) <= m.cfg.MaxFrameSize
}

// emitPayloadHead queues a PAYLOAD frame's length prefix, header and
// metadata, and lends its data (Ready().Lent) to follow them on the wire.
func (m *Machine) emitPayloadHead(id uint32, md, data []byte, next, complete bool) error {
	var flags frame.Flags
	if next {
		flags |= frame.FlagNext
	}
	if complete {
		flags |= frame.FlagComplete
	}
	out, err := frame.AppendPayloadHead(m.out, id, flags, md, len(data))
	if err != nil {
		return err
	}
	m.sentPos += uint64(len(out) - len(m.out) - frame.LengthPrefixSize + len(data))
	m.out = out
	m.lent = append(m.lent, Lent{At: len(m.out), Data: data})
	return nil
}

func (m *Machine) emitOne(t frame.Type, id, n uint32, flags frame.Flags, md, data []byte) error {
	if t != frame.TypePayload {
		flags &^= frame.FlagNext
		if t != frame.TypeRequestChannel {
			flags &^= frame.FlagComplete
		}
	}
	at := len(m.out)
	m.out = frame.ReserveLengthPrefix(m.out)
	var out []byte
	var err error
	switch t {
	case frame.TypeRequestResponse:
		out, err = frame.AppendRequestResponse(m.out, id, flags, md, data)
	case frame.TypeRequestFNF:
		out, err = frame.AppendRequestFNF(m.out, id, flags, md, data)
	case frame.TypeRequestStream:
		out, err = frame.AppendRequestStream(m.out, id, flags, n, md, data)
	case frame.TypeRequestChannel:
		out, err = frame.AppendRequestChannel(m.out, id, flags, n, md, data)
	default:
		out, err = frame.AppendPayload(m.out, id, flags, md, data)
	}
	return m.finish(at, out, err)
}
