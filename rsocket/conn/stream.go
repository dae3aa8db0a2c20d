package conn

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// stream is the sub-machine of one stream. Its state is the pair of halves
// (sendOpen, recvOpen) plus credits:
//
//	interaction       requester: send / recv       responder: send / recv
//	request-response  closed / open (1 credit)     open (1 credit) / closed
//	fire-and-forget   no stream is kept on either side
//	request-stream    closed / open (N credits)    open (N credits) / closed
//	request-channel   open (0) / open (N)          open (N) / open (0)
//
// (a channel whose REQUEST_CHANNEL carried C starts with the requester's
// send half closed). A half closes on COMPLETE (sent or received); CANCEL
// and ERROR close both, except a CANCEL from a channel's responder, which
// closes only the requester's send half. The stream is freed when both
// halves are closed.
type stream struct {
	id        uint32
	kind      Interaction
	requester bool // this end sent the request
	announced bool // the application has seen the stream (false while an inbound request is reassembled)
	sendOpen  bool
	recvOpen  bool
	// sendCredits: PAYLOADs we may still send. recvCredits: PAYLOADs the
	// peer may still send us. Invariant: each <= frame.MaxRequestN.
	sendCredits credits
	recvCredits credits
	asm         *assembly // inbound fragments being reassembled, or nil
	// Byte-credits extension (bytecredits.go): governed streams limit
	// elements by bytes too. sendBytes: bytes we may still send (negative
	// after a payload larger than the credit); recvBytes: the same count
	// as the peer's, for enforcement.
	governed             bool
	sendBytes, recvBytes int64
	// orphan: restored from a ResumeImage; its handler died with the
	// process that took the image, so AcceptResume ends it (restore.go).
	orphan bool
}

// assembly holds an inbound fragmented request or PAYLOAD. Invariant:
// len(md)+len(data) <= cfg.MaxPayloadSize, and the sum over all streams is
// Machine.asmBytes.
type assembly struct {
	request  frame.Type // REQUEST_* type when reassembling a request, else 0
	initialN uint32
	md, data []byte
	hasMD    bool
	next     bool
}

// dropAsm discards an inbound reassembly of s, if any.
func (m *Machine) dropAsm(s *stream) {
	if s.asm != nil {
		m.asmBytes -= len(s.asm.md) + len(s.asm.data)
		s.asm = nil
	}
}

func (m *Machine) free(s *stream) {
	m.dropAsm(s)
	delete(m.streams, s.id)
	m.streamsVersion++
	// Nothing refers to s once it left the map (callers return right
	// after freeing): keep it for the next stream, so that a request costs
	// no allocation here.
	if len(m.spare) < maxSpareStreams {
		*s = stream{}
		m.spare = append(m.spare, s)
	}
	if m.draining && len(m.streams) == 0 && m.state == stateOpen {
		m.shutdown(m.drainErr, frame.ErrorCodeConnectionClose, "connection closed")
	}
}

// maxSpareStreams bounds the freed streams kept for reuse per machine.
const maxSpareStreams = 64

// newStream returns a zeroed stream, a spare one if there is one.
func (m *Machine) newStream() *stream {
	if n := len(m.spare); n > 0 {
		s := m.spare[n-1]
		m.spare = m.spare[:n-1]
		return s
	}
	return new(stream)
}

// maybeFree frees s when both halves are closed.
func (m *Machine) maybeFree(s *stream) {
	if !s.sendOpen && !s.recvOpen {
		m.free(s)
	}
}

// mutation switches off guarantees, for tests that prove the simulation
// notices (sim_test.go). Always false outside those tests.
var mutation struct {
	skipSendCredits bool // SendPayload ignores the peer's credits
	keepOnCancel    bool // a responder keeps its stream after the peer's CANCEL
	ignoreLifetime  bool // Tick never closes a silent connection (rsocket-java #1118)
	ignoreLease     bool // a responder accepts requests beyond the lease it sent
	skipByteCredits bool // SendPayload ignores the peer's byte credits
}

// ---- application commands ----

func (m *Machine) canRequest() error {
	switch {
	case m.state == stateClosed:
		return ErrClosed
	case m.state != stateOpen:
		return ErrNotReady
	case m.draining:
		return ErrDraining
	case m.idsDone:
		return ErrStreamIDsExhausted
	case len(m.streams) >= m.cfg.MaxStreams:
		return ErrTooManyStreams
	}
	return nil
}

func (m *Machine) allocID() uint32 {
	id := m.nextID
	if m.nextID > frame.MaxStreamID-2 {
		m.idsDone = true
	} else {
		m.nextID += 2
	}
	return id
}

func (m *Machine) request(now time.Duration, kind Interaction, n uint32, md, data []byte, complete bool) (uint32, error) {
	// The lease is checked against the time of the command, not the last
	// frame or timer: on an idle connection those can be long past, and a
	// lease whose TTL ran out since then allows nothing.
	m.now = max(m.now, now)
	if err := m.canRequest(); err != nil {
		return 0, err
	}
	if (kind == RequestStream || kind == RequestChannel) && (n == 0 || n > frame.MaxRequestN) {
		return 0, fmt.Errorf("%w: initial request N %d must be in 1..2^31-1", ErrInvalidArgument, n)
	}
	if !m.takeLease() {
		return 0, ErrNoLease
	}
	id := m.allocID()
	if err := m.emitPayload(kind.frameType(), id, n, md, data, true, complete && kind == RequestChannel); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	if kind == FireAndForget {
		return id, nil
	}
	s := m.newStream()
	s.id, s.kind, s.requester, s.announced, s.recvOpen = id, kind, true, true, true
	switch kind {
	case RequestResponse:
		s.recvCredits = 1
	case RequestStream:
		s.recvCredits = credits(n)
	case RequestChannel:
		s.recvCredits = credits(n)
		s.sendOpen = !complete
	}
	if m.bc.active {
		m.govern(s)
	}
	m.streams[id] = s
	m.streamsVersion++
	return id, nil
}

// The request commands take the driver's monotonic now, like Receive and
// Tick: with lease negotiated, the request is checked against the LEASE
// as it stands at now (an expired LEASE allows nothing).

// RequestResponse opens a request-response stream; the response arrives as
// one EventPayload (or EventError).
func (m *Machine) RequestResponse(now time.Duration, metadata, data []byte) (uint32, error) {
	return m.request(now, RequestResponse, 0, metadata, data, false)
}

// RequestFNF sends a fire-and-forget request; no stream is kept.
func (m *Machine) RequestFNF(now time.Duration, metadata, data []byte) (uint32, error) {
	return m.request(now, FireAndForget, 0, metadata, data, false)
}

// RequestStream opens a stream granting n (1..2^31-1) initial credits.
func (m *Machine) RequestStream(now time.Duration, n uint32, metadata, data []byte) (uint32, error) {
	return m.request(now, RequestStream, n, metadata, data, false)
}

// RequestChannel opens a channel granting n initial credits; the request's
// payload is the first element of our half, and complete ends our half at
// once. Further PAYLOADs need credits from the responder's REQUEST_N.
func (m *Machine) RequestChannel(now time.Duration, n uint32, metadata, data []byte, complete bool) (uint32, error) {
	return m.request(now, RequestChannel, n, metadata, data, complete)
}

func (m *Machine) live(id uint32) (*stream, error) {
	if m.state == stateClosed {
		return nil, ErrClosed
	}
	s := m.streams[id]
	if s == nil || !s.announced {
		return nil, fmt.Errorf("%w: %d", ErrUnknownStream, id)
	}
	return s, nil
}

// SendPayload sends a PAYLOAD on stream id: next carries an element (one
// credit), complete ends our half. A request-response response always
// completes. Refused without credits (ErrNoCredits) or on a closed half.
func (m *Machine) SendPayload(id uint32, metadata, data []byte, next, complete bool) error {
	_, err := m.sendPayload(id, metadata, data, next, complete, false)
	return err
}

// MinLent is the least data SendPayloadLent lends: below it the copy
// costs less than the driver's bookkeeping of a separate piece.
const MinLent = frame.MinPooledBuf

// SendPayloadLent is SendPayload that may leave data out of the output
// (Ready().Lent) instead of copying it into its frame: the caller then keeps
// data unchanged until the driver wrote it or dropped it. It lends when
// the data is at least MinLent, fits one frame with the metadata, and
// the connection is not resumable (a resumable one retains its frames for
// replay, which needs their bytes); lent reports whether it did. The
// frame on the wire is the same either way.
func (m *Machine) SendPayloadLent(id uint32, metadata, data []byte, next, complete bool) (lent bool, err error) {
	return m.sendPayload(id, metadata, data, next, complete, true)
}

func (m *Machine) sendPayload(id uint32, metadata, data []byte, next, complete, lend bool) (bool, error) {
	s, err := m.live(id)
	if err != nil {
		return false, err
	}
	if !s.sendOpen {
		return false, fmt.Errorf("%w: stream %d (%s) cannot send PAYLOAD", ErrNotAllowed, id, s.kind)
	}
	if !next && !complete {
		return false, fmt.Errorf("%w: a PAYLOAD needs next or complete", ErrInvalidArgument)
	}
	if s.kind == RequestResponse {
		complete = true
	}
	if !next && (metadata != nil || len(data) > 0) {
		return false, fmt.Errorf("%w: a PAYLOAD without next carries no element", ErrInvalidArgument)
	}
	if next && s.sendCredits == 0 && !mutation.skipSendCredits && !mutationIgnoreRequestN {
		return false, fmt.Errorf("%w: stream %d", ErrNoCredits, id)
	}
	if next && s.governed && s.sendBytes <= 0 && !mutation.skipByteCredits {
		return false, fmt.Errorf("%w: stream %d has %d byte credits", ErrNoCredits, id, s.sendBytes)
	}
	lent := lend && m.mayLend(metadata, data)
	if lent {
		err = m.emitPayloadHead(id, metadata, data, next, complete)
	} else {
		err = m.emitPayload(frame.TypePayload, id, 0, metadata, data, next, complete)
	}
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	if next {
		s.sendCredits.take()
		if s.governed {
			s.sendBytes -= payloadBytes(metadata, data)
		}
	}
	if complete {
		s.sendOpen = false
		m.maybeFree(s)
	}
	return lent, nil
}

// Complete ends our half of stream id (PAYLOAD with C only).
func (m *Machine) Complete(id uint32) error { return m.SendPayload(id, nil, nil, false, true) }

// RequestN grants the peer n more credits on stream id.
func (m *Machine) RequestN(id uint32, n uint32) error {
	s, err := m.live(id)
	if err != nil {
		return err
	}
	if n == 0 || n > frame.MaxRequestN {
		return fmt.Errorf("%w: request N %d must be in 1..2^31-1", ErrInvalidArgument, n)
	}
	if !s.recvOpen || s.kind == RequestResponse {
		return fmt.Errorf("%w: stream %d (%s) receives no more PAYLOADs", ErrNotAllowed, id, s.kind)
	}
	s.recvCredits.grant(n)
	m.emitRequestN(id, n)
	return nil
}

// Cancel cancels stream id. A requester's cancel ends the stream; a
// channel responder's cancel only stops the requester's half.
func (m *Machine) Cancel(id uint32) error {
	s, err := m.live(id)
	if err != nil {
		return err
	}
	switch {
	case s.requester:
		m.emitCancel(id)
		s.sendOpen, s.recvOpen = false, false
	case s.kind == RequestChannel && s.recvOpen:
		m.emitCancel(id)
		s.recvOpen = false
		// Fragments of a PAYLOAD already on their way must not complete
		// into an event on the half the application closed.
		m.dropAsm(s)
	default:
		return fmt.Errorf("%w: a %s responder cannot cancel (send an error)", ErrNotAllowed, s.kind)
	}
	m.maybeFree(s)
	return nil
}

// SendError ends stream id with ERROR[code] (APPLICATION_ERROR, REJECTED,
// CANCELED, INVALID or an application code). Only a responder, or the
// requester of a channel, may send one.
func (m *Machine) SendError(id uint32, code frame.ErrorCode, message string) error {
	s, err := m.live(id)
	if err != nil {
		return err
	}
	if code.IsConnectionScoped() || code == frame.ErrorCodeReserved || code == frame.ErrorCodeReservedExtension {
		return fmt.Errorf("%w: %s is not a stream error code", ErrInvalidArgument, code)
	}
	if s.requester && s.kind != RequestChannel {
		return fmt.Errorf("%w: the requester of a %s cancels, it does not send ERROR", ErrNotAllowed, s.kind)
	}
	m.emitError(id, code, message)
	m.free(s)
	return nil
}

// MetadataPush sends a METADATA_PUSH.
func (m *Machine) MetadataPush(metadata []byte) error {
	switch {
	case m.state == stateClosed:
		return ErrClosed
	case m.state != stateOpen:
		return ErrNotReady
	}
	if n := frame.Size(frame.TypeMetadataPush, metadata, nil); n > m.cfg.MaxFrameSize {
		// METADATA_PUSH cannot be fragmented.
		return fmt.Errorf("%w: METADATA_PUSH of %d bytes exceeds MaxFrameSize %d", ErrInvalidArgument, n, m.cfg.MaxFrameSize)
	}
	at := len(m.out)
	m.out = frame.ReserveLengthPrefix(m.out)
	out, err := frame.AppendMetadataPush(m.out, metadata)
	if err := m.finish(at, out, err); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	return nil
}

// Credits returns the credits of stream id: how many PAYLOADs we may send,
// and how many the peer may still send us.
func (m *Machine) Credits(id uint32) (send, recv uint32, ok bool) {
	s := m.streams[id]
	if s == nil {
		return 0, 0, false
	}
	return uint32(s.sendCredits), uint32(s.recvCredits), true
}
