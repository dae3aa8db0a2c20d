package conn

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// Resumption (Protocol.md "Resuming Operation").
//
// Positions count the bytes of every frame with a stream id other than 0,
// after fragmentation, without the length prefix, on both ends: sent
// frames in finish (which also retains them), received ones in Receive.
// That is rsocket-java's counting and frame.IsResumable's rule. Protocol.md
// lists the resumable types (REQUEST_*, REQUEST_N, CANCEL, ERROR, PAYLOAD);
// the two differ only for EXT frames on a stream, which Java counts and
// retains. We follow Java so positions agree with the peer that most users
// resume against, and because our own EXT frames on a stream, the
// byte-credits grants (bytecredits.go), are flow-control state that must
// be replayed after a cut like REQUEST_N.
//
// A resumable machine outlives its transport: TransportClosed moves it to
// link "down" (streams stay alive, commands still work and their frames go
// to the retained buffer only), EventReconnect tells the driver. A client
// then dials again and calls Reconnected (RESUME goes out, nothing else
// until RESUME_OK); a server driver finds the machine by token and calls
// AcceptResume with the RESUME frame. Either end replays what the peer has
// not received, from the retained buffer, exactly once: replay starts at
// the peer's position and every frame is retained once, when first sent.

type linkState uint8

const (
	linkUp       linkState = iota
	linkDown               // transport lost; waiting for a new one
	linkResuming           // client: RESUME sent, waiting for RESUME_OK
)

// resumeState is the resumption part of a Machine.
type resumeState struct {
	on    bool   // this connection resumes (client: token set; server: SETUP with R accepted)
	token []byte // the session's token
	link  linkState
	// downSince: when the link went down; the session ends at
	// downSince + ResumeSessionLifetime unless resumed.
	downSince time.Duration
	// ret holds the sent frames at positions retStart.. (length-prefixed),
	// not yet acknowledged by the peer. Invariant: len(ret) <=
	// cfg.ResumeBufferBytes, oldest frames dropped first; a peer further
	// behind than retStart cannot resume and is rejected.
	ret      []byte
	retStart uint64
	// appended counts the bytes ever appended to ret (ResumeCursor): a
	// persisted copy of the session takes only what was appended since.
	appended uint64
}

// Errors of resumption.
var (
	// ErrResumeRejected: the server answered RESUME with
	// ERROR[REJECTED_RESUME], or the peers' positions cannot be reconciled.
	// Not retried: the session is gone.
	ErrResumeRejected = errors.New("rsocket/conn: resume rejected")
	// ErrResumeExpired: no resume happened within ResumeSessionLifetime.
	ErrResumeExpired = errors.New("rsocket/conn: resume session expired")
)

// countsForResume: see the comment above (frame.IsResumable: every frame on
// a stream other than 0).
func countsForResume(h frame.Header) bool { return h.Resumable() }

// retain keeps a copy of the sent frame f (without prefix) for replay.
func (m *Machine) retain(f []byte) {
	r := &m.rs
	r.ret = frame.ReserveLengthPrefix(r.ret)
	at := len(r.ret) - frame.LengthPrefixSize
	r.ret = append(r.ret, f...)
	_ = frame.SetLengthPrefix(r.ret, at)
	r.appended += uint64(frame.LengthPrefixSize + len(f))
	for len(r.ret) > m.cfg.ResumeBufferBytes {
		m.dropRetained()
	}
}

// dropRetained forgets the oldest retained frame.
func (m *Machine) dropRetained() {
	f, rest, ok := NextFrame(m.rs.ret)
	if !ok {
		m.rs.ret = m.rs.ret[:0]
		return
	}
	m.rs.retStart += uint64(len(f))
	m.rs.ret = rest
}

// trimRetained drops the frames the peer acknowledged by position pos.
func (m *Machine) trimRetained(pos uint64) {
	for m.rs.retStart < pos && len(m.rs.ret) > 0 {
		f, _, _ := NextFrame(m.rs.ret)
		if m.rs.retStart+uint64(len(f)) > pos {
			return // pos inside a frame: cannot happen with a sane peer
		}
		m.dropRetained()
	}
	if len(m.rs.ret) == 0 {
		m.rs.ret = nil // let a burst's buffer go
	}
}

// replay queues the retained frames from position pos on.
func (m *Machine) replay(pos uint64) {
	m.trimRetained(pos)
	m.out = append(m.out, m.rs.ret...)
}

// SetResumeBufferBytes changes the bound on the sent frames retained for
// replay (Config.ResumeBufferBytes; n <= 0 is ignored), dropping the
// oldest retained frames beyond it at once: a server shares one memory
// budget among its sessions and lowers each one's bound as sessions come.
// A peer then further behind than what is retained cannot resume.
func (m *Machine) SetResumeBufferBytes(n int) {
	if n <= 0 {
		return
	}
	m.cfg.ResumeBufferBytes = n
	for len(m.rs.ret) > n {
		m.dropRetained()
	}
}

// RetainedBytes returns the bytes held for replay (bounded by
// Config.ResumeBufferBytes) and the position of the first of them.
func (m *Machine) RetainedBytes() (n int, first uint64) { return len(m.rs.ret), m.rs.retStart }

// Resumable reports whether this connection resumes after a transport loss.
func (m *Machine) Resumable() bool { return m.rs.on && m.state == stateOpen }

// ResumeToken returns the session's token (nil without resumption).
func (m *Machine) ResumeToken() []byte { return m.rs.token }

// disconnect keeps the session after a transport loss.
func (m *Machine) disconnect(err error) {
	if m.rs.link == linkUp {
		m.rs.downSince = m.now
	}
	m.rs.link = linkDown
	m.resetLease()
	m.out = m.out[:0] // unwritten bytes are replayed from the retained buffer
	m.events = append(m.events, Event{Kind: EventReconnect, Err: err})
}

// Reconnected (client) tells the machine a new transport is up after
// EventReconnect: it queues RESUME and sends nothing else until RESUME_OK.
func (m *Machine) Reconnected(now time.Duration) error {
	if m.cfg.Role != Client || m.state != stateOpen || !m.rs.on || m.rs.link == linkUp {
		return fmt.Errorf("%w: Reconnected is for a resumable client whose transport was lost", ErrNotAllowed)
	}
	m.now = max(m.now, now)
	m.out = m.out[:0]
	at := len(m.out)
	m.out = frame.ReserveLengthPrefix(m.out)
	out, err := frame.AppendResume(m.out, frame.ProtocolMajor, frame.ProtocolMinor, m.rs.token, m.recvPos, m.rs.retStart)
	if err != nil {
		m.out = m.out[:at]
		return err
	}
	m.out = out
	_ = frame.SetLengthPrefix(m.out, at)
	m.rs.link = linkResuming
	m.lastReceived = now // RESUME_OK must come within the max lifetime
	return nil
}

// receiveResuming (client): only RESUME_OK or an ERROR on stream 0 may
// come before RESUME_OK.
func (m *Machine) receiveResuming(now time.Duration, h frame.Header, b []byte) {
	switch {
	case h.Type == frame.TypeResumeOK:
		r, err := frame.ParseResumeOK(b)
		if err != nil {
			m.decodeError(h, err)
			return
		}
		pos := r.LastReceivedClientPosition
		m.rs.link = linkUp
		if pos < m.rs.retStart || pos > m.sentPos {
			m.closeLocal(frame.ErrorCodeConnectionError,
				fmt.Sprintf("RESUME_OK position %d outside the retained %d..%d", pos, m.rs.retStart, m.sentPos), ErrResumeRejected)
			return
		}
		m.nextKeepalive = now + m.keepaliveInterval
		m.replay(pos)
		m.events = append(m.events, Event{Kind: EventResumed})
	case h.Type == frame.TypeError && h.StreamID == 0:
		e, err := frame.ParseError(b)
		if err != nil {
			m.decodeError(h, err)
			return
		}
		msg := "resume rejected: " + string(e.Data)
		if e.Code != frame.ErrorCodeRejectedResume {
			msg = "connection closed while resuming: " + string(e.Data)
		}
		m.shutdown(fmt.Errorf("%w: %w", ErrResumeRejected, &PeerError{Code: e.Code, Message: string(e.Data)}), e.Code, msg)
	default:
		m.rs.link = linkUp
		m.closeLocal(frame.ErrorCodeConnectionError, h.Type.String()+" before RESUME_OK", ErrProtocol)
	}
}

// AcceptResume (server) resumes this session over a new transport with
// the RESUME frame b that arrived first on it; the driver found the
// machine by the frame's token. It answers RESUME_OK and replays what the
// client lacks, or ERROR[REJECTED_RESUME] and closes the session (every
// stream fails) when the positions cannot be satisfied: the client is
// further behind than the retained buffer, or retains too little of its
// own. ok reports which.
func (m *Machine) AcceptResume(now time.Duration, b []byte) (ok bool) {
	if m.cfg.Role != Server || m.state != stateOpen || !m.rs.on {
		return false
	}
	m.now = max(m.now, now)
	if m.rs.link == linkUp {
		// The old transport is half-open: the client already gave up on it.
		m.disconnect(errors.New("rsocket/conn: replaced by a resumed connection"))
	}
	m.out = m.out[:0]
	r, err := frame.ParseResume(b)
	reason := ""
	switch {
	case err != nil:
		reason = err.Error()
	case !bytes.Equal(r.ResumeToken, m.rs.token):
		reason = "unknown resume token"
	case r.MajorVersion != frame.ProtocolMajor && !swappedVersion(r.MajorVersion, r.MinorVersion):
		reason = fmt.Sprintf("protocol version %d.%d is not supported", r.MajorVersion, r.MinorVersion)
	case r.LastReceivedServerPosition < m.rs.retStart || r.LastReceivedServerPosition > m.sentPos:
		reason = fmt.Sprintf("client position %d outside the retained %d..%d", r.LastReceivedServerPosition, m.rs.retStart, m.sentPos)
	case r.FirstAvailableClientPosition > m.recvPos:
		reason = fmt.Sprintf("client retains from %d, server received up to %d", r.FirstAvailableClientPosition, m.recvPos)
	}
	m.rs.link = linkUp // the ERROR or RESUME_OK goes on the new transport
	if reason != "" {
		m.closeLocal(frame.ErrorCodeRejectedResume, reason, ErrResumeRejected)
		return false
	}
	at := len(m.out)
	m.out = frame.ReserveLengthPrefix(m.out)
	out, err := frame.AppendResumeOK(m.out, m.recvPos)
	if err != nil {
		m.out = m.out[:at]
		return false
	}
	m.out = out
	_ = frame.SetLengthPrefix(m.out, at)
	m.lastReceived = now
	from := r.LastReceivedServerPosition
	if mutationResumeOffByOne && from > 0 {
		from--
	}
	m.replay(from)
	m.endOrphans()
	m.events = append(m.events, Event{Kind: EventResumed})
	return true
}

// swappedVersion: a RESUME saying 0.1 is a 1.0 client that swapped major
// and minor (rsocket-js 1.0.0-alpha.3 writes the SETUP's minor as the
// RESUME's major). No RSocket version 0.1 exists, so taking it as 1.0
// resumes those clients and misreads no one.
func swappedVersion(major, minor uint16) bool { return major == 0 && minor == frame.ProtocolMajor }

// ResumeToken returns the token of a RESUME frame b, for a server driver
// to find the session.
func ResumeToken(b []byte) ([]byte, error) {
	r, err := frame.ParseResume(b)
	if err != nil {
		return nil, err
	}
	return r.ResumeToken, nil
}
