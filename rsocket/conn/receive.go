package conn

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// Receive handles one inbound frame b (without its length prefix). The
// caller may reuse b when Receive returns. Decode errors are answered as
// the spec says (frame.Kind): ignored, ERROR[INVALID] on the stream, or
// ERROR on stream 0 and close.
func (m *Machine) Receive(now time.Duration, b []byte) {
	if m.state == stateClosed {
		return
	}
	m.lastReceived = now
	m.now = max(m.now, now)
	h, err := frame.ParseHeader(b)
	if err != nil {
		m.decodeError(h, err)
		return
	}
	switch m.rs.link {
	case linkDown:
		return // a straggler of the lost transport: the peer replays it
	case linkResuming:
		m.receiveResuming(now, h, b)
		return
	}
	if countsForResume(h) {
		m.recvPos += uint64(len(b))
	}
	if m.cfg.Role == Server && m.state == stateNew {
		m.receiveFirst(h, b)
		return
	}
	if m.state == stateNew { // client before Start: nothing may arrive
		m.closeLocal(frame.ErrorCodeConnectionError, "frame before SETUP was sent", ErrProtocol)
		return
	}
	if m.cfg.Role == Client && !(h.Type == frame.TypeError && h.StreamID == 0) {
		m.established = true
	}
	if m.bc.awaiting && m.receiveOffer(h, b) {
		return
	}
	switch h.Type {
	case frame.TypeSetup, frame.TypeResumeOK:
		// A SETUP after the accepted one, or any SETUP at a client, MUST be
		// ignored; RESUME_OK means nothing outside resuming
		// ("Handling the Unexpected").
	case frame.TypeResume:
		// "A Server that receives a RESUME frame after a SETUP frame,
		// SHOULD send an ERROR[CONNECTION_ERROR]", and the same after a
		// previous RESUME (Protocol.md "Resume Operation"). A client
		// ignores it ("Handling the Unexpected").
		if m.cfg.Role == Server {
			m.closeLocal(frame.ErrorCodeConnectionError, "RESUME on an established connection", ErrProtocol)
		}
	case frame.TypeLease:
		m.receiveLease(now, b)
	case frame.TypeKeepalive:
		k, err := frame.ParseKeepalive(b)
		if err != nil {
			m.decodeError(h, err)
			return
		}
		if m.rs.on {
			m.trimRetained(k.LastReceivedPosition)
		}
		if k.Respond() {
			m.emitKeepalive(false, k.Data)
		}
	case frame.TypeRequestResponse, frame.TypeRequestFNF, frame.TypeRequestStream, frame.TypeRequestChannel:
		m.receiveRequest(now, h, b)
	case frame.TypeRequestN:
		r, err := frame.ParseRequestN(b)
		if err != nil {
			m.decodeError(h, err)
			return
		}
		m.receiveRequestN(r)
	case frame.TypeCancel:
		if _, err := frame.ParseCancel(b); err != nil {
			m.decodeError(h, err)
			return
		}
		m.receiveCancel(h.StreamID)
	case frame.TypePayload:
		p, err := frame.ParsePayload(b)
		if err != nil {
			m.decodeError(h, err)
			return
		}
		m.receivePayload(p)
	case frame.TypeError:
		e, err := frame.ParseError(b)
		if err != nil {
			m.decodeError(h, err)
			return
		}
		m.receiveError(e)
	case frame.TypeMetadataPush:
		p, err := frame.ParseMetadataPush(b)
		if err != nil {
			m.decodeError(h, err)
			return
		}
		md := p.Metadata
		if md == nil {
			md = []byte{}
		}
		m.events = append(m.events, Event{Kind: EventMetadataPush, Metadata: m.copyIn(md)})
	case frame.TypeExt:
		e, err := frame.ParseExt(b)
		if err != nil {
			m.decodeError(h, err)
			return
		}
		if m.receiveExt(e) {
			return
		}
		if !h.CanIgnore() {
			m.closeLocal(frame.ErrorCodeConnectionError, "unsupported EXT frame without the I flag", ErrProtocol)
		}
	default:
		_, err := frame.Validate(b)
		m.decodeError(h, err)
	}
}

// decodeError applies the verdict of the codec.
func (m *Machine) decodeError(h frame.Header, err error) {
	var de *frame.DecodeError
	if !errors.As(err, &de) {
		m.closeLocal(frame.ErrorCodeConnectionError, err.Error(), ErrProtocol)
		return
	}
	switch de.Kind {
	case frame.KindIgnore:
	case frame.KindStream:
		m.streamInvalid(h, de.Error())
	default:
		code := de.Code
		if code == 0 {
			code = frame.ErrorCodeConnectionError
		}
		m.closeLocal(code, de.Error(), fmt.Errorf("%w: %v", ErrProtocol, err))
	}
}

// streamInvalid answers a frame that is well formed but invalid for its
// stream (request N of 0). A new request gets ERROR[INVALID] and no state;
// a live stream fails; anything else is ignored.
func (m *Machine) streamInvalid(h frame.Header, msg string) {
	if s := m.streams[h.StreamID]; s != nil {
		m.failStream(s, msg)
		return
	}
	if h.Type.IsRequest() && m.newPeerID(h.StreamID) {
		m.emitError(h.StreamID, frame.ErrorCodeInvalid, msg)
	}
}

// failStream ends s because the peer broke the protocol on it: the peer is
// told (ERROR[INVALID], or CANCEL from a requester that may not send
// ERROR), the application gets a local EventError.
func (m *Machine) failStream(s *stream, msg string) {
	if s.requester && s.kind != RequestChannel {
		m.emitCancel(s.id)
	} else {
		m.emitError(s.id, frame.ErrorCodeInvalid, msg)
	}
	if s.announced {
		m.events = append(m.events, Event{Kind: EventError, StreamID: s.id, Code: frame.ErrorCodeInvalid, Message: msg, Local: true})
	}
	m.free(s)
}

// receiveFirst: a server's first frame must be SETUP (Protocol.md
// "Connection Establishment").
func (m *Machine) receiveFirst(h frame.Header, b []byte) {
	switch h.Type {
	case frame.TypeSetup:
	case frame.TypeResume:
		m.closeLocal(frame.ErrorCodeRejectedResume, "resume is not supported", ErrProtocol)
		return
	default:
		m.closeLocal(frame.ErrorCodeInvalidSetup, "first frame must be SETUP, got "+h.Type.String(), ErrProtocol)
		return
	}
	s, err := frame.ParseSetup(b)
	if err != nil {
		// A malformed SETUP is INVALID_SETUP even with the I flag: there is
		// no connection to keep ignoring frames on.
		m.closeLocal(frame.ErrorCodeInvalidSetup, err.Error(), fmt.Errorf("%w: %v", ErrProtocol, err))
		return
	}
	switch {
	case s.MajorVersion != frame.ProtocolMajor || s.MinorVersion != frame.ProtocolMinor:
		// Only 1.0: Protocol.md "Versioning Scheme" says "RSocket assumes
		// that all version changes (major and minor) are backward
		// incompatible" and leaves accepting *lower* versions to the
		// server; 1.0 is the lowest 1.x, so 1.1 and up are a protocol we
		// do not speak (rsocket-java refuses them too). docs/rsocket.md.
		m.closeLocal(frame.ErrorCodeUnsupportedSetup,
			fmt.Sprintf("protocol version %d.%d is not supported (1.0 is)", s.MajorVersion, s.MinorVersion), ErrProtocol)
		return
	case s.Lease() && !m.cfg.Lease:
		// "If the server does NOT accept the contents of the SETUP frame,
		// the server MUST send back an ERROR[INVALID_SETUP|UNSUPPORTED_SETUP]
		// and then close the connection" (Connection Establishment).
		m.closeLocal(frame.ErrorCodeUnsupportedSetup, "lease is not supported by this server", ErrProtocol)
		return
	case s.ResumeEnabled() && !m.cfg.Resume:
		// Protocol.md: a server without resume MUST reject with
		// REJECTED_SETUP (rsocket-java #1121 leaves the connection hanging).
		m.closeLocal(frame.ErrorCodeRejectedSetup, "resume is not supported", ErrProtocol)
		return
	case s.ResumeEnabled():
		m.rs.on, m.rs.token = true, append([]byte{}, s.ResumeToken...)
	}
	m.state = stateOpen
	m.bc.awaiting = m.cfg.ByteCredits > 0
	m.lease.enabled = s.Lease()
	m.keepaliveInterval = time.Duration(s.KeepaliveInterval) * time.Millisecond
	m.maxLifetime = time.Duration(s.MaxLifetime) * time.Millisecond
	m.events = append(m.events, Event{Kind: EventSetup, Setup: &SetupInfo{
		MajorVersion: s.MajorVersion, MinorVersion: s.MinorVersion,
		KeepaliveInterval: s.KeepaliveInterval, MaxLifetime: s.MaxLifetime,
		MetadataMIME: string(s.MetadataMIME), DataMIME: string(s.DataMIME),
		Metadata: m.copyIn(s.Metadata), Data: m.copyIn(s.Data), Lease: s.Lease(),
		ResumeToken: m.rs.token,
	}})
}

// newPeerID reports whether id may open a new stream from the peer: the
// peer's parity and not a stream alive now. Protocol.md asks a requester
// for locally unique ids of its parity, not for increasing ones on the
// wire, and peers that allocate ids on one goroutine and write frames on
// many (rsocket-go) deliver them out of order: refusing an id below the
// highest seen lost their requests (found by the rsocket-go interop run).
func (m *Machine) newPeerID(id uint32) bool {
	peerOdd := m.cfg.Role == Server
	return id != 0 && (id%2 == 1) == peerOdd && m.streams[id] == nil
}

func (m *Machine) receiveRequest(now time.Duration, h frame.Header, b []byte) {
	var md, data []byte
	var n uint32
	var err error
	switch h.Type {
	case frame.TypeRequestResponse:
		var r frame.RequestResponse
		r, err = frame.ParseRequestResponse(b)
		md, data = r.Metadata, r.Data
	case frame.TypeRequestFNF:
		var r frame.RequestFNF
		r, err = frame.ParseRequestFNF(b)
		md, data = r.Metadata, r.Data
	case frame.TypeRequestStream:
		var r frame.RequestStream
		r, err = frame.ParseRequestStream(b)
		md, data, n = r.Metadata, r.Data, r.InitialN
	case frame.TypeRequestChannel:
		var r frame.RequestChannel
		r, err = frame.ParseRequestChannel(b)
		md, data, n = r.Metadata, r.Data, r.InitialN
	}
	if err != nil {
		m.decodeError(h, err)
		return
	}
	id := h.StreamID
	// A request on an id in use, or with our parity, MUST be ignored
	// ("Handling the Unexpected").
	if !m.newPeerID(id) {
		return
	}
	if m.draining {
		m.emitError(id, frame.ErrorCodeRejected, "connection is closing")
		return
	}
	if !m.admitLeased(now) {
		// "MUST respond with an ERROR[REJECTED]": nothing was processed.
		m.emitError(id, frame.ErrorCodeRejected, "request beyond the lease")
		return
	}
	if len(m.streams) >= m.cfg.MaxStreams {
		m.emitError(id, frame.ErrorCodeRejected, fmt.Sprintf("too many streams (limit %d)", m.cfg.MaxStreams))
		return
	}
	kind := interactionOf(h.Type)
	follows := h.Flags&frame.FlagFollows != 0
	complete := kind == RequestChannel && h.Flags&frame.FlagComplete != 0 && !follows
	if size := len(md) + len(data); !follows && size > m.cfg.MaxPayloadSize {
		// The same bound and answer as a reassembled request
		// (appendFragment), so a peer meets one limit whether it
		// fragments or not; nothing reaches the application.
		m.oversizeRequest(id, kind, size)
		return
	}
	if !follows && kind == FireAndForget {
		m.events = append(m.events, Event{Kind: EventRequest, StreamID: id, Interaction: kind,
			Metadata: m.copyIn(md), Data: m.copyIn(data)})
		return
	}
	s := m.newStream()
	s.id, s.kind = id, kind
	if m.bc.active {
		m.govern(s)
	}
	m.streams[id] = s
	m.streamsVersion++
	if follows {
		s.asm = &assembly{request: h.Type, initialN: n}
		m.appendFragment(s, md, data)
		return
	}
	m.openResponder(s, n, m.copyIn(md), m.copyIn(data), complete, false)
}

// openResponder sets up the responder halves of a complete request and
// tells the application; owned: md and data are the event's alone
// (Event.Owned).
func (m *Machine) openResponder(s *stream, n uint32, md, data []byte, complete, owned bool) {
	s.announced = true
	switch s.kind {
	case FireAndForget:
		m.events = append(m.events, Event{Kind: EventRequest, StreamID: s.id, Interaction: s.kind, Metadata: md, Data: data, Owned: owned})
		m.free(s)
		return
	case RequestResponse:
		s.sendOpen, s.sendCredits = true, 1
	case RequestStream:
		s.sendOpen, s.sendCredits = true, credits(n)
	case RequestChannel:
		s.sendOpen, s.sendCredits = true, credits(n)
		s.recvOpen = !complete
	}
	m.events = append(m.events, Event{Kind: EventRequest, StreamID: s.id, Interaction: s.kind,
		Metadata: md, Data: data, N: n, Complete: complete, Owned: owned})
}

// oversizeRequest answers a whole (unfragmented) request whose payload,
// metadata plus data, exceeds MaxPayloadSize: ERROR[INVALID] on its
// stream, no state kept, the handler never runs. INVALID, not REJECTED:
// the request breaks this end's stated limit and would be refused again
// anywhere with the same limit, and it is the answer a fragmented request
// has always got. A fire-and-forget has no stream to answer on (its
// requester forgot it): it is dropped and counted (OversizeFNFDropped).
func (m *Machine) oversizeRequest(id uint32, kind Interaction, size int) {
	if kind == FireAndForget {
		m.droppedFNF++
		return
	}
	m.emitError(id, frame.ErrorCodeInvalid, fmt.Sprintf("payload of %d bytes exceeds %d bytes", size, m.cfg.MaxPayloadSize))
}

// OversizeFNFDropped returns how many fire-and-forget requests were
// dropped, unanswered, for exceeding Config.MaxPayloadSize.
func (m *Machine) OversizeFNFDropped() uint64 { return m.droppedFNF }

// appendFragment adds a fragment to s's reassembly, enforcing the memory
// bounds. It returns false when s or the connection was failed.
func (m *Machine) appendFragment(s *stream, md, data []byte) bool {
	a := s.asm
	add := len(md) + len(data)
	if len(a.md)+len(a.data)+add > m.cfg.MaxPayloadSize {
		if a.request == frame.TypeRequestFNF {
			m.droppedFNF++ // nothing to answer: see oversizeRequest
			m.free(s)
			return false
		}
		m.failStream(s, fmt.Sprintf("reassembled payload exceeds %d bytes", m.cfg.MaxPayloadSize))
		return false
	}
	if m.asmBytes+add > m.cfg.MaxReassemblyBytes {
		m.closeLocal(frame.ErrorCodeConnectionError,
			fmt.Sprintf("payloads being reassembled exceed %d bytes", m.cfg.MaxReassemblyBytes), ErrProtocol)
		return false
	}
	if md != nil {
		a.hasMD = true
		a.md = append(a.md, md...)
	}
	a.data = append(a.data, data...)
	m.asmBytes += add
	return true
}

func (m *Machine) receivePayload(p frame.Payload) {
	s := m.streams[p.StreamID]
	if s == nil {
		return // unknown stream: ignore
	}
	if s.asm != nil {
		if s.asm.request == 0 && !s.recvOpen {
			m.dropAsm(s) // cannot happen: closing the half drops it
			return
		}
		if !m.appendFragment(s, p.Metadata, p.Data) {
			return
		}
		a := s.asm
		a.next = a.next || p.Next()
		if p.Follows() {
			return
		}
		s.asm = nil
		m.asmBytes -= len(a.md) + len(a.data)
		var md []byte
		if a.hasMD {
			md = a.md
			if md == nil {
				md = []byte{}
			}
		}
		// The reassembled buffers are handed to the application as they
		// are: this end never touches them again.
		if a.request != 0 {
			complete := s.kind == RequestChannel && p.Complete()
			m.openResponder(s, a.initialN, md, a.data, complete, true)
			return
		}
		m.deliverPayload(s, md, a.data, a.next, p.Complete(), true)
		return
	}
	if !s.recvOpen {
		return // nothing more expected on this half: ignore
	}
	if size := len(p.Metadata) + len(p.Data); size > m.cfg.MaxPayloadSize {
		// A whole PAYLOAD, or the first fragment of one, over the bound
		// fails the stream as a reassembly over it does.
		m.failStream(s, fmt.Sprintf("payload of %d bytes exceeds %d bytes", size, m.cfg.MaxPayloadSize))
		return
	}
	if p.Follows() {
		// The first fragment of a PAYLOAD: it needs a credit like the
		// whole would, checked now so a peer cannot pile up fragments.
		if p.Next() && s.recvCredits == 0 {
			m.failStream(s, "PAYLOAD beyond the REQUEST_N credits")
			return
		}
		if p.Next() && s.governed && s.recvBytes <= 0 {
			m.failStream(s, "PAYLOAD beyond the byte credits")
			return
		}
		s.asm = &assembly{}
		if m.appendFragment(s, p.Metadata, p.Data) {
			s.asm.next = p.Next()
		}
		return
	}
	m.deliverPayload(s, m.copyIn(p.Metadata), m.copyIn(p.Data), p.Next(), p.Complete(), false)
}

// deliverPayload applies a complete (reassembled) PAYLOAD to s; owned:
// md and data are the event's alone (Event.Owned).
func (m *Machine) deliverPayload(s *stream, md, data []byte, next, complete, owned bool) {
	if s.kind == RequestResponse {
		complete = true // "MUST assume it is set"
	}
	if next && !s.recvCredits.take() {
		m.failStream(s, "PAYLOAD beyond the REQUEST_N credits")
		return
	}
	if next && s.governed {
		if s.recvBytes <= 0 {
			m.failStream(s, "PAYLOAD beyond the byte credits")
			return
		}
		s.recvBytes -= payloadBytes(md, data)
	}
	m.events = append(m.events, Event{Kind: EventPayload, StreamID: s.id, Metadata: md, Data: data, Next: next, Complete: complete, Owned: owned})
	if complete {
		s.recvOpen = false
		m.maybeFree(s)
	}
}

func (m *Machine) receiveRequestN(r frame.RequestN) {
	s := m.streams[r.StreamID]
	if s == nil || !s.announced || !s.sendOpen || s.kind == RequestResponse {
		return
	}
	s.sendCredits.grant(r.N)
	m.events = append(m.events, Event{Kind: EventRequestN, StreamID: s.id, N: r.N})
}

func (m *Machine) receiveCancel(id uint32) {
	s := m.streams[id]
	if s == nil {
		return
	}
	if !s.announced { // cancel of a request still being reassembled
		m.free(s)
		return
	}
	switch {
	case !s.requester:
		m.events = append(m.events, Event{Kind: EventCancel, StreamID: id})
		if !mutation.keepOnCancel {
			m.free(s)
		}
	case s.kind == RequestChannel && s.sendOpen:
		// The responder stops our half only.
		s.sendOpen = false
		m.events = append(m.events, Event{Kind: EventCancel, StreamID: id})
		m.maybeFree(s)
	}
}

func (m *Machine) receiveError(e frame.ErrorFrame) {
	if e.StreamID == 0 {
		switch e.Code {
		case frame.ErrorCodeInvalidSetup, frame.ErrorCodeUnsupportedSetup, frame.ErrorCodeRejectedSetup, frame.ErrorCodeRejectedResume:
			// A server MUST ignore these; a client only after establishment.
			if m.cfg.Role == Server || m.established {
				return
			}
		case frame.ErrorCodeConnectionClose:
			m.startDrain(&PeerError{Code: e.Code, Message: string(e.Data)})
			return
		}
		m.shutdown(&PeerError{Code: e.Code, Message: string(e.Data)}, e.Code, string(e.Data))
		return
	}
	s := m.streams[e.StreamID]
	if s == nil {
		return
	}
	if s.announced {
		m.events = append(m.events, Event{Kind: EventError, StreamID: s.id, Code: e.Code, Message: string(e.Data)})
	}
	m.free(s)
}
