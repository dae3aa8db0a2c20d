package conn

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// leasePair is a client and server that negotiated lease, the server's
// LEASE (ttl, count) received by the client at time 0.
func leasePair(t *testing.T, ccfg, scfg Config, ttl time.Duration, count uint32) *pair {
	t.Helper()
	ccfg.Lease, scfg.Lease = true, true
	p := newPair(t, ccfg, scfg)
	ok(t, p.s.SendLease(p.now, ttl, count))
	p.pump()
	return p
}

// Issue 22 item 4. Reference: "Lease Semantics": "Requester MUST NOT send
// more than Number of Requests specified in the LEASE frame within the
// Time-To-Live value in the LEASE"; LEASE Frame: "When a LEASE expires due
// to time, the value of the Number of Requests that a Requester may make
// is implicitly 0." The reproduction: one LEASE with TTL 300 ms, nothing
// else arrives, the client still sent REQUEST_RESPONSE 1.5 s later
// because the machine's clock had not moved. The request command carries
// its time now; no Tick or frame comes in between here.
func TestLeaseExpiresOnIdleConnection(t *testing.T) {
	p := leasePair(t, Config{}, Config{}, 300*time.Millisecond, 10)
	if _, err := p.c.RequestResponse(1500*time.Millisecond, nil, []byte("late")); !errors.Is(err, ErrNoLease) {
		t.Fatalf("request 1.5 s after a 300 ms LEASE: %v, want ErrNoLease", err)
	}
	if fs, _ := drain(t, p.c); len(fs) != 0 {
		t.Fatalf("sent %s on an expired lease", describe(fs))
	}

	// Within the TTL the same request goes out; at the TTL it does not.
	p = leasePair(t, Config{}, Config{}, 300*time.Millisecond, 10)
	id(p.c.RequestResponse(299*time.Millisecond, nil, []byte("in time")))
	if _, err := p.c.RequestFNF(300*time.Millisecond, nil, nil); !errors.Is(err, ErrNoLease) {
		t.Fatalf("request at the TTL: %v, want ErrNoLease", err)
	}
}

// Issue 22 item 4: NextDeadline includes the lease's expiry, so a driver
// wakes then; Tick ends the lease (LeaseAvailable false, the deadline
// moves on to the keepalive).
func TestLeaseExpiryIsADeadline(t *testing.T) {
	p := leasePair(t, Config{KeepaliveInterval: 20 * time.Second}, Config{}, 300*time.Millisecond, 10)
	if d, ok := p.c.NextDeadline(); !ok || d != 300*time.Millisecond {
		t.Fatalf("client deadline %v %v, want the lease expiry 300ms", d, ok)
	}
	p.c.Tick(300 * time.Millisecond)
	if p.c.LeaseAvailable(300 * time.Millisecond) {
		t.Fatal("lease available after its TTL")
	}
	if d, ok := p.c.NextDeadline(); !ok || d != 20*time.Second {
		t.Fatalf("deadline after the expiry %v %v, want the keepalive at 20s", d, ok)
	}
	// A lease used up needs no wake-up either.
	p = leasePair(t, Config{KeepaliveInterval: 20 * time.Second}, Config{}, 300*time.Millisecond, 1)
	id(p.c.RequestFNF(0, nil, nil))
	if d, _ := p.c.NextDeadline(); d != 20*time.Second {
		t.Fatalf("deadline with the lease used up %v, want 20s", d)
	}
}

// Issue 22 item 5. Reference: "Resume Operation": "Leasing semantics are
// NOT assumed to carry over from previous connections when resuming. LEASE
// semantics MUST be restarted upon a new connection by sending a LEASE
// frame from the server." After a resume the client has no lease until
// the server's new LEASE (the driver sends it on EventResumed), and the
// server admits nothing beyond the LEASE it sends on the new connection.
func TestLeaseRestartsAfterResume(t *testing.T) {
	p := newPair(t, Config{Lease: true, ResumeToken: []byte("tok")}, Config{Lease: true, Resume: true})
	ok(t, p.s.SendLease(0, time.Hour, 100))
	ok(t, p.c.SendLease(0, time.Hour, 100))
	p.pump()
	if !p.c.LeaseAvailable(0) || !p.s.LeaseAvailable(0) {
		t.Fatal("no lease before the cut")
	}
	if !p.resumeAfterCut(t, true) {
		t.Fatal("resume rejected")
	}
	if !p.s.LeaseEnabled() || !p.c.LeaseEnabled() {
		t.Fatal("lease no longer negotiated after resume")
	}
	p.pump() // RESUME_OK reaches the client
	if p.c.LeaseAvailable(0) || p.s.LeaseAvailable(0) {
		t.Fatal("the old connection's lease still allows requests after resume")
	}
	if _, err := p.c.RequestResponse(0, nil, nil); !errors.Is(err, ErrNoLease) {
		t.Fatalf("client request after resume, before a new LEASE: %v", err)
	}
	// A request the client sends anyway (a rogue one) is refused: the
	// server's old grant is gone too.
	p.s.Receive(0, must(frame.AppendRequestResponse(nil, 99, 0, nil, nil)))
	if fs, _ := drain(t, p.s); describe(fs) != "ERROR(99,REJECTED)" {
		t.Fatalf("server answered a request without a new lease with %s", describe(fs))
	}
	ok(t, p.s.SendLease(0, time.Second, 1))
	p.pump()
	id(p.c.RequestResponse(0, nil, nil))
}

// Issue 22 item 5: the server's lease is reset when its transport is
// lost, also when the client's RESUME replaces a transport the server
// still believed up.
func TestLeaseResetOnHalfOpenReplace(t *testing.T) {
	p := newPair(t, Config{Lease: true, ResumeToken: []byte("tok")}, Config{Lease: true, Resume: true})
	ok(t, p.c.SendLease(0, time.Hour, 100))
	p.pump()
	if !p.s.LeaseAvailable(0) {
		t.Fatal("server has no lease")
	}
	if !p.resumeAfterCut(t, false) {
		t.Fatal("resume rejected")
	}
	if p.s.LeaseAvailable(0) {
		t.Fatal("server keeps the old connection's lease after resume")
	}
}
