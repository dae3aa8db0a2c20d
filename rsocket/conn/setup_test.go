package conn

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// Issue 22 item 7. Reference: "Connection Establishment": "If the server
// does NOT accept the contents of the SETUP frame, the server MUST send
// back an ERROR[INVALID_SETUP|UNSUPPORTED_SETUP] and then close the
// connection." A server without Config.Lease does not accept the L flag
// (before: the machine accepted it and the driver answered REJECTED_SETUP).
func TestSetupLeaseUnsupported(t *testing.T) {
	lease := must(frame.AppendSetup(nil, frame.Setup{Header: frame.Header{Flags: frame.FlagLease}, MajorVersion: 1,
		KeepaliveInterval: 100, MaxLifetime: 500}))
	m, _ := New(Config{Role: Server}, 0)
	m.Receive(0, lease)
	fs, evs := drain(t, m)
	if describe(fs) != "ERROR(0,UNSUPPORTED_SETUP)" || len(evs) != 1 || evs[0].Kind != EventClosed {
		t.Fatalf("SETUP with L to a server without lease: sent %s, events %s", describe(fs), describeEvents(evs))
	}
	m, _ = New(Config{Role: Server, Lease: true}, 0)
	m.Receive(0, lease)
	if fs, evs := drain(t, m); len(fs) != 0 || len(evs) != 1 || evs[0].Kind != EventSetup || !evs[0].Setup.Lease || !m.LeaseEnabled() {
		t.Fatalf("SETUP with L to a server with lease: sent %s, events %s", describe(fs), describeEvents(evs))
	}
	// A server with lease serves clients without it too.
	m, _ = New(Config{Role: Server, Lease: true}, 0)
	m.Receive(0, setupFrame(t))
	if _, evs := drain(t, m); len(evs) != 1 || evs[0].Kind != EventSetup || m.LeaseEnabled() {
		t.Fatalf("SETUP without L: events %s, lease %v", describeEvents(evs), m.LeaseEnabled())
	}
}

// Issue 22 item 8. Reference: "Versioning Scheme": "RSocket assumes that
// all version changes (major and minor) are backward incompatible. [...]
// It is up to a server to accept clients of lower versions than what it
// supports." We speak 1.0 only: 1.1 is refused like 2.0 (rsocket-java's
// server refuses any version but 1.0 too). docs/rsocket.md.
func TestSetupMinorVersion(t *testing.T) {
	for _, v := range [][2]uint16{{1, 1}, {1, 65535}, {0, 2}, {2, 0}} {
		m, _ := New(Config{Role: Server}, 0)
		m.Receive(0, must(frame.AppendSetup(nil, frame.Setup{MajorVersion: v[0], MinorVersion: v[1], KeepaliveInterval: 100, MaxLifetime: 500})))
		fs, evs := drain(t, m)
		if describe(fs) != "ERROR(0,UNSUPPORTED_SETUP)" || len(evs) != 1 || evs[0].Kind != EventClosed {
			t.Errorf("SETUP %d.%d: sent %s, events %s", v[0], v[1], describe(fs), describeEvents(evs))
		}
	}
	m, _ := New(Config{Role: Server}, 0)
	m.Receive(0, must(frame.AppendSetup(nil, frame.Setup{MajorVersion: 1, MinorVersion: 0, KeepaliveInterval: 100, MaxLifetime: 500})))
	if _, evs := drain(t, m); len(evs) != 1 || evs[0].Kind != EventSetup {
		t.Fatalf("SETUP 1.0: %s", describeEvents(evs))
	}
}

// Issue 22 item 8. Reference: "Resume Operation": "A Server that receives
// a RESUME frame after a SETUP frame, SHOULD send an ERROR[CONNECTION_ERROR]"
// and "A Server that receives a RESUME frame after a previous RESUME
// frame, SHOULD send an ERROR[CONNECTION_ERROR]". Before, both were
// ignored. A client ignores a RESUME ("Handling the Unexpected").
func TestResumeOnEstablishedConnection(t *testing.T) {
	resume := must(frame.AppendResume(nil, 1, 0, []byte("tok"), 0, 0))
	t.Run("server after SETUP", func(t *testing.T) {
		m := newServer(t, Config{})
		m.Receive(0, must(frame.AppendRequestStream(nil, 1, 0, 2, nil, []byte("q"))))
		drain(t, m)
		m.Receive(0, resume)
		fs, evs := drain(t, m)
		closed, err := m.Closed()
		if describe(fs) != "ERROR(0,CONNECTION_ERROR)" || !closed || !errors.Is(err, ErrProtocol) {
			t.Fatalf("sent %s, closed %v (%v)", describe(fs), closed, err)
		}
		if len(evs) != 2 || evs[0].Kind != EventError || evs[0].StreamID != 1 || evs[1].Kind != EventClosed {
			t.Fatalf("events %s", describeEvents(evs))
		}
	})
	t.Run("resumable server after SETUP with R", func(t *testing.T) {
		p := resumePair(t, Config{})
		p.s.Receive(0, resume)
		if fs, _ := drain(t, p.s); describe(fs) != "ERROR(0,CONNECTION_ERROR)" {
			t.Fatalf("sent %s", describe(fs))
		}
		// The session is over: a RESUME on the wrong transport is a
		// protocol error, not a resume (that comes first on a new one).
		if c, _ := p.s.Closed(); !c {
			t.Fatal("not closed")
		}
	})
	t.Run("server after a previous RESUME", func(t *testing.T) {
		p := resumePair(t, Config{})
		if !p.resumeAfterCut(t, true) {
			t.Fatal("resume rejected")
		}
		p.pump()
		p.s.Receive(p.now, resume)
		if fs, _ := drain(t, p.s); describe(fs) != "ERROR(0,CONNECTION_ERROR)" {
			t.Fatalf("second RESUME: sent %s", describe(fs))
		}
	})
	t.Run("client ignores RESUME", func(t *testing.T) {
		p := newPair(t, Config{}, Config{})
		p.c.Receive(0, resume)
		fs, evs := drain(t, p.c)
		if c, _ := p.c.Closed(); len(fs)+len(evs) != 0 || c {
			t.Fatalf("client: sent %s, events %s, closed %v", describe(fs), describeEvents(evs), c)
		}
	})
	t.Run("server ignores a second SETUP", func(t *testing.T) {
		// "A server MUST ignore a SETUP frame after it has accepted a
		// previous SETUP." ("Handling the Unexpected")
		m := newServer(t, Config{})
		m.Receive(time.Millisecond, setupFrame(t))
		fs, evs := drain(t, m)
		if c, _ := m.Closed(); len(fs)+len(evs) != 0 || c {
			t.Fatalf("second SETUP: sent %s, events %s, closed %v", describe(fs), describeEvents(evs), c)
		}
	})
}
