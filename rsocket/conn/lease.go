package conn

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// Lease (Protocol.md "Lease Semantics"), when the client's SETUP carried
// the L flag. Both directions are symmetric: each end's requester may only
// send requests within a LEASE received from the peer's responder (its
// TTL from when it arrived, and its number of requests), and each end's
// responder answers a request beyond the LEASE it sent with ERROR[REJECTED]
// and no side effect. A fragmented request counts once. Leases are an
// application decision: the responder application sends them (SendLease);
// the machine only enforces them.
type lease struct {
	enabled bool
	// Received from the peer: what our requester may send.
	recvLeft    uint32
	recvExpires time.Duration
	haveRecv    bool
	// Sent to the peer: what its requester may send us.
	sentLeft    uint32
	sentExpires time.Duration
}

// ErrNoLease: lease was negotiated and no valid LEASE allows a request now
// (none received yet, expired, or its requests used up).
var ErrNoLease = errors.New("rsocket/conn: no lease allows a request")

// SendLease grants the peer's requester count requests during ttl, from
// now. It is only allowed when lease was negotiated.
func (m *Machine) SendLease(now, ttl time.Duration, count uint32) error {
	switch {
	case m.state == stateClosed:
		return ErrClosed
	case m.state != stateOpen:
		return ErrNotReady
	case m.rs.link != linkUp:
		// The LEASE would be lost with the transport, and a lease does not
		// survive it anyway: send one after EventResumed.
		return fmt.Errorf("%w: transport lost; send a LEASE after EventResumed", ErrNotReady)
	case !m.lease.enabled:
		return fmt.Errorf("%w: lease was not negotiated", ErrNotAllowed)
	case ttl < 0 || ttl > frame.MaxRequestN*time.Millisecond || count > frame.MaxRequestN:
		return fmt.Errorf("%w: lease ttl %v or count %d out of range", ErrInvalidArgument, ttl, count)
	}
	at := len(m.out)
	m.out = frame.ReserveLengthPrefix(m.out)
	out, err := frame.AppendLease(m.out, uint32(ttl/time.Millisecond), count, nil)
	if err := m.finish(at, out, err); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	m.lease.sentLeft = count
	m.lease.sentExpires = now + ttl.Truncate(time.Millisecond)
	return nil
}

// receiveLease records a LEASE from the peer.
func (m *Machine) receiveLease(now time.Duration, b []byte) {
	l, err := frame.ParseLease(b)
	if err != nil {
		m.decodeError(l.Header, err)
		return
	}
	if !m.lease.enabled {
		return // not negotiated: ignore
	}
	m.lease.haveRecv = true
	m.lease.recvLeft = l.NumberOfRequests
	m.lease.recvExpires = now + time.Duration(l.TTL)*time.Millisecond
	m.events = append(m.events, Event{Kind: EventLease, N: l.NumberOfRequests, TTL: time.Duration(l.TTL) * time.Millisecond})
}

// leaseDeadline is when the LEASE received expires, while it still
// allows requests: NextDeadline includes it, so the driver calls Tick
// then and the lease is seen to end even on an idle connection.
func (m *Machine) leaseDeadline() (time.Duration, bool) {
	l := &m.lease
	if !l.enabled || !l.haveRecv || l.recvLeft == 0 || m.now >= l.recvExpires {
		return 0, false
	}
	return l.recvExpires, true
}

// tickLease ends the LEASE received once its TTL passed: "When a LEASE
// expires due to time, the value of the Number of Requests that a
// Requester may make is implicitly 0."
func (m *Machine) tickLease(now time.Duration) {
	if m.lease.enabled && m.lease.haveRecv && now >= m.lease.recvExpires {
		m.lease.recvLeft = 0
	}
}

// resetLease forgets both LEASEs when the transport is lost: "Leasing
// semantics are NOT assumed to carry over from previous connections when
// resuming. LEASE semantics MUST be restarted upon a new connection by
// sending a LEASE frame from the server." (Protocol.md "Resume
// Operation"). Our requester waits for a new LEASE (requests made while
// the link is down or resuming get ErrNoLease), and our responder admits
// nothing until it sends one (the driver does on EventResumed).
func (m *Machine) resetLease() {
	if !m.lease.enabled {
		return
	}
	m.lease.haveRecv, m.lease.recvLeft, m.lease.recvExpires = false, 0, 0
	m.lease.sentLeft, m.lease.sentExpires = 0, 0
}

// LeaseEnabled reports whether lease was negotiated on this connection
// (the client's SETUP carried L and it was accepted): the responder must
// then send a LEASE after SETUP and again after every resume.
func (m *Machine) LeaseEnabled() bool { return m.lease.enabled }

// takeLease spends one request of the lease received; false when none.
func (m *Machine) takeLease() bool {
	if !m.lease.enabled {
		return true
	}
	if !m.lease.haveRecv || m.lease.recvLeft == 0 || m.now >= m.lease.recvExpires {
		return false
	}
	m.lease.recvLeft--
	return true
}

// admitLeased spends one request of the lease we sent; false: the peer
// requested beyond it.
func (m *Machine) admitLeased(now time.Duration) bool {
	if !m.lease.enabled || mutation.ignoreLease || mutationIgnoreLease {
		return true
	}
	if m.lease.sentLeft == 0 || now >= m.lease.sentExpires {
		return false
	}
	m.lease.sentLeft--
	return true
}

// LeaseAvailable reports whether our requester may send a request at now
// without waiting for a LEASE. Without negotiated lease it is true while
// the connection is open. A load balancer asks it to skip servers that
// would only queue the request.
func (m *Machine) LeaseAvailable(now time.Duration) bool {
	if m.state != stateOpen {
		return false
	}
	if !m.lease.enabled {
		return true
	}
	return m.lease.haveRecv && m.lease.recvLeft > 0 && now < m.lease.recvExpires
}
