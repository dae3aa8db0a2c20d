package conn

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// connStates puts a machine in each connection state that SETUP, RESUME
// and LEASE handling distinguish (issue 22) and returns it with its
// output drained. Time starts at 0; a LEASE sent or received in a state
// has a TTL of 1 s.
var connStates = []struct {
	name  string
	setup func(t *testing.T) *Machine
}{
	{"server new, no lease, no resume", func(t *testing.T) *Machine {
		m, _ := New(Config{Role: Server}, 0)
		return m
	}},
	{"server new, lease and resume", func(t *testing.T) *Machine {
		m, _ := New(Config{Role: Server, Lease: true, Resume: true}, 0)
		return m
	}},
	{"server open", func(t *testing.T) *Machine { return newServer(t, Config{}) }},
	{"server open, lease negotiated, no LEASE sent", func(t *testing.T) *Machine {
		m, _ := New(Config{Role: Server, Lease: true}, 0)
		m.Receive(0, leaseSetupFrame(nil))
		return m
	}},
	{"server open, LEASE(1s, 1) sent", func(t *testing.T) *Machine {
		m, _ := New(Config{Role: Server, Lease: true}, 0)
		m.Receive(0, leaseSetupFrame(nil))
		ok(t, m.SendLease(0, time.Second, 1))
		return m
	}},
	{"server open, resumable, LEASE(1s, 1) sent", func(t *testing.T) *Machine {
		m, _ := New(Config{Role: Server, Lease: true, Resume: true}, 0)
		m.Receive(0, leaseSetupFrame([]byte("tok")))
		ok(t, m.SendLease(0, time.Second, 1))
		return m
	}},
	{"server resumable, transport lost", func(t *testing.T) *Machine {
		m, _ := New(Config{Role: Server, Lease: true, Resume: true}, 0)
		m.Receive(0, leaseSetupFrame([]byte("tok")))
		ok(t, m.SendLease(0, time.Second, 1))
		m.TransportClosed(errors.New("cut"))
		return m
	}},
	{"client open, lease negotiated, no LEASE", func(t *testing.T) *Machine {
		return startedClient(t, Config{Lease: true})
	}},
	{"client open, LEASE(1s, 2) received", func(t *testing.T) *Machine {
		m := startedClient(t, Config{Lease: true})
		m.Receive(0, must(frame.AppendLease(nil, 1000, 2, nil)))
		return m
	}},
	{"client open, LEASE(1s, 1) used up", func(t *testing.T) *Machine {
		m := startedClient(t, Config{Lease: true})
		m.Receive(0, must(frame.AppendLease(nil, 1000, 1, nil)))
		id(m.RequestFNF(0, nil, nil))
		return m
	}},
	{"client resumable, LEASE(1s, 2), transport lost", func(t *testing.T) *Machine {
		m := startedClient(t, Config{Lease: true, ResumeToken: []byte("tok")})
		m.Receive(0, must(frame.AppendLease(nil, 1000, 2, nil)))
		m.TransportClosed(errors.New("cut"))
		return m
	}},
	{"client resumed (RESUME_OK), LEASE(1s, 2) before the cut", func(t *testing.T) *Machine {
		m := startedClient(t, Config{Lease: true, ResumeToken: []byte("tok")})
		m.Receive(0, must(frame.AppendLease(nil, 1000, 2, nil)))
		m.TransportClosed(errors.New("cut"))
		ok(t, m.Reconnected(0))
		m.Receive(0, must(frame.AppendResumeOK(nil, 0)))
		return m
	}},
}

// connInputs are the inputs whose handling issue 22 changed or pinned.
var connInputs = []struct {
	name string
	do   func(m *Machine) error
}{
	{"recv SETUP 1.0", func(m *Machine) error { m.Receive(0, setupVersion(1, 0, 0)); return nil }},
	{"recv SETUP 1.1", func(m *Machine) error { m.Receive(0, setupVersion(1, 1, 0)); return nil }},
	{"recv SETUP 1.0 with L", func(m *Machine) error { m.Receive(0, setupVersion(1, 0, frame.FlagLease)); return nil }},
	{"recv RESUME", func(m *Machine) error {
		m.Receive(0, must(frame.AppendResume(nil, 1, 0, []byte("tok"), 0, 0)))
		return nil
	}},
	{"recv RESUME_OK", func(m *Machine) error { m.Receive(0, must(frame.AppendResumeOK(nil, 0))); return nil }},
	{"recv LEASE(1s, 2)", func(m *Machine) error { m.Receive(0, must(frame.AppendLease(nil, 1000, 2, nil))); return nil }},
	{"recv REQUEST_FNF", func(m *Machine) error {
		id := uint32(1)
		if m.cfg.Role == Client {
			id = 2
		}
		m.Receive(500*time.Millisecond, must(frame.AppendRequestFNF(nil, id, 0, nil, []byte("q"))))
		return nil
	}},
	{"RequestFNF at 0.5s", func(m *Machine) error { _, err := m.RequestFNF(500*time.Millisecond, nil, nil); return err }},
	{"RequestFNF at 1s", func(m *Machine) error { _, err := m.RequestFNF(time.Second, nil, nil); return err }},
	{"Tick at 1s", func(m *Machine) error { m.Tick(time.Second); return nil }},
	{"SendLease(1s, 3)", func(m *Machine) error { return m.SendLease(0, time.Second, 3) }},
}

func leaseSetupFrame(token []byte) []byte {
	return must(frame.AppendSetup(nil, frame.Setup{Header: frame.Header{Flags: frame.FlagLease}, MajorVersion: 1,
		KeepaliveInterval: 20000, MaxLifetime: 90000, ResumeToken: token}))
}

func setupVersion(major, minor uint16, flags frame.Flags) []byte {
	return must(frame.AppendSetup(nil, frame.Setup{Header: frame.Header{Flags: flags}, MajorVersion: major, MinorVersion: minor,
		KeepaliveInterval: 20000, MaxLifetime: 90000}))
}

func startedClient(t *testing.T, cfg Config) *Machine {
	t.Helper()
	cfg.Role = Client
	m, err := New(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	ok(t, m.Start(0))
	drain(t, m)
	// A frame from the server establishes the connection (as the first
	// LEASE would); KEEPALIVE does without side effects.
	m.Receive(0, must(frame.AppendKeepalive(nil, false, 0, nil)))
	return m
}

func connErrName(err error) string {
	for _, e := range []error{ErrNoLease, ErrNotReady, ErrNotAllowed, ErrClosed} {
		if errors.Is(err, e) {
			return strings.TrimPrefix(e.Error(), "rsocket/conn: ")
		}
	}
	if err != nil {
		return err.Error()
	}
	return "ok"
}

// TestConnTable runs every connection state × input of SETUP, RESUME and
// LEASE handling and compares the outcome (frames sent, events, command
// result, whether a request is allowed at 0.5 s, the next deadline, closed)
// with testdata/conn_table.golden, the reviewed specification of these
// cells (go test -run TestConnTable -rewrite regenerates it).
func TestConnTable(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "# state | input | frames sent | events | command | lease at 0.5s, next deadline, closed\n")
	for _, st := range connStates {
		fmt.Fprintf(&b, "\n## %s\n", st.name)
		for _, in := range connInputs {
			m := st.setup(t)
			drain(t, m)
			err := in.do(m)
			fs, evs := drain(t, m)
			after := fmt.Sprintf("lease=%v", m.LeaseAvailable(500*time.Millisecond))
			if d, ok := m.NextDeadline(); ok {
				after += fmt.Sprintf(" deadline=%v", d)
			}
			if c, _ := m.Closed(); c {
				after += " CLOSED"
			}
			fmt.Fprintf(&b, "%-22s | %-26s | %-12s | %-26s | %s\n", in.name, describe(fs), describeEvents(evs), connErrName(err), after)
		}
	}
	golden(t, "testdata/conn_table.golden", b.String())
}
