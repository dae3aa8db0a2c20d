// Package conntest is the conformance suite of protocol.Conn: what every
// transport of the delivery protocol (memconn, grpctransport,
// rsockettransport) must do the same, run by each transport's tests
// through Run, as golang.org/x/net/nettest.TestConn is for net.Conn. The
// transports' tests had copies of these checks; a transport's own tests
// keep only what is its own (TLS, tokens, connection sharing, redials).
//
// The suite drives sessions through a protocol.Dialer against a scripted
// protocol.Service served by the transport under test, so both ends of
// each session are the transport's.
package conntest

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/protocol"
)

// Serve serves svc over the transport under test for the rest of the test
// and returns a Dialer to it.
type Serve func(t *testing.T, svc protocol.Service) protocol.Dialer

// Run runs the suite, each check a subtest with a server of its own.
func Run(t *testing.T, serve Serve) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, serve Serve)
	}{
		{"SendSession", testSendSession},
		{"SendReusesNothing", testSendReusesNothing},
		{"StatusCrossesTheWire", testStatusCrossesTheWire},
		{"ReadSession", testReadSession},
		{"ClientCloseEndsHandler", testClientCloseEndsHandler},
		{"ContextCancelEndsSession", testContextCancelEndsSession},
		{"ManySessions", testManySessions},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, serve) })
	}
}

// bound is how long a check waits for a session to end: only a hang
// reaches it.
const bound = time.Minute

// Agent ids the scripted sink answers with a status instead of a
// Welcome.
var refusals = []struct {
	agent     string
	status    protocol.Status
	retryable bool
}{
	{"bad", protocol.StatusPermissionDenied, false},
	{"down", protocol.StatusUnavailable, true},
	{"replaced", protocol.StatusAborted, false},
}

// Svc is the scripted sink the suite runs against. A Send session:
// Hello is answered with a Welcome (8 messages, 1 MiB of credit, the
// agent id as session id) or, for the agent ids of refusals, with a
// status; agent "silent" is never answered (a sink gone quiet after the
// Hello, for a transport's own tests of that). Each Message with Credit, Error (over credit, retryable) and
// Ack of its id, after checking that every byte of its payload is
// byte(ID) (a sender's later reuse of its buffer must not show). A Read
// session: ReadStart from 10 or less gives Stored (two records), waits
// for the Commit of that offset, then EndOfLog; from more, OutOfRange.
type Svc struct {
	// Started receives each Send session once welcomed, so that a test
	// can watch the sink's end (its context, the Peer it sees).
	Started chan protocol.Conn
}

// NewSvc returns a Svc whose Started holds up to 256 sessions.
func NewSvc() *Svc { return &Svc{Started: make(chan protocol.Conn, 256)} }

func (s *Svc) ServeSend(c protocol.Conn) error {
	for {
		f, err := c.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *protocol.Hello:
			if f.AgentID == "silent" {
				<-c.Context().Done()
				return nil
			}
			for _, r := range refusals {
				if f.AgentID == r.agent {
					return protocol.Errorf(r.status, "agent %q: refused by the script", f.AgentID)
				}
			}
			if err := c.Send(&protocol.Welcome{Version: protocol.Version, Credits: protocol.Credits{Messages: 8, Bytes: 1 << 20}, SessionID: f.AgentID}); err != nil {
				return err
			}
			select {
			case s.Started <- c:
			default:
			}
		case *protocol.Message:
			for i, b := range f.Payload {
				if b != byte(f.ID) {
					return protocol.Errorf(protocol.StatusInvalid, "message %d: payload byte %d is %d, want %d", f.ID, i, b, byte(f.ID))
				}
			}
			for _, out := range []protocol.Frame{
				&protocol.Credit{Credits: &protocol.Credits{Messages: 9}},
				&protocol.Error{MessageID: f.ID, Code: protocol.CodeOverCredit, Retryable: true},
				&protocol.Ack{Ranges: []protocol.IDRange{{First: f.ID, Last: f.ID}}},
			} {
				if err := c.Send(out); err != nil {
					return err
				}
			}
		}
	}
}

func (s *Svc) ServeRead(c protocol.Conn) error {
	f, err := c.Recv()
	if err != nil {
		return err
	}
	st, ok := f.(*protocol.ReadStart)
	if !ok {
		return protocol.Errorf(protocol.StatusInvalid, "want ReadStart, got %s", protocol.Name(f))
	}
	if st.From > 10 {
		return protocol.Errorf(protocol.StatusOutOfRange, "offset %d", st.From)
	}
	if err := c.Send(&protocol.Stored{Offset: st.From, AgentID: "a", MessageID: 1, Records: [][]byte{[]byte("r"), []byte("s")}}); err != nil {
		return err
	}
	if f, err := c.Recv(); err != nil {
		return err
	} else if cm, ok := f.(*protocol.Commit); !ok || cm.Offset != st.From {
		return protocol.Errorf(protocol.StatusInvalid, "want Commit of %d, got %s %+v", st.From, protocol.Name(f), f)
	}
	return c.Send(&protocol.EndOfLog{Next: st.From + 1})
}

// Hello sends agent's Hello on c and wants the scripted Welcome.
func Hello(t *testing.T, c protocol.Conn, agent string) {
	t.Helper()
	if err := c.Send(&protocol.Hello{AgentID: agent, Version: protocol.Version, Codecs: []protocol.Codec{protocol.CodecZstd}}); err != nil {
		t.Fatal(err)
	}
	f, err := c.Recv()
	w, ok := f.(*protocol.Welcome)
	if err != nil || !ok || w.Credits.Messages != 8 || w.Credits.Bytes != 1<<20 || w.SessionID != agent {
		t.Fatalf("welcome: %#v %v", f, err)
	}
}

// message sends message id with a payload of n bytes of byte(id) and
// wants the scripted Credit, Error and Ack, in that order.
func message(t *testing.T, c protocol.Conn, id uint64, n int) {
	t.Helper()
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(id)
	}
	if err := c.Send(&protocol.Message{ID: id, Records: 1, Codec: protocol.CodecZstd, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for len(names) < 3 {
		f, err := c.Recv()
		if err != nil {
			t.Fatalf("message %d: %v", id, err)
		}
		names = append(names, protocol.Name(f))
		switch f := f.(type) {
		case *protocol.Credit:
			if f.Credits == nil || f.Credits.Messages != 9 {
				t.Fatalf("message %d: %+v", id, f)
			}
		case *protocol.Error:
			if f.MessageID != id || f.Code != protocol.CodeOverCredit || !f.Retryable {
				t.Fatalf("message %d: %+v", id, f)
			}
		case *protocol.Ack:
			if len(f.Ranges) != 1 || f.Ranges[0] != (protocol.IDRange{First: id, Last: id}) {
				t.Fatalf("message %d: ack %v", id, f.Ranges)
			}
		}
	}
	if fmt.Sprint(names) != "[Credit Error Ack]" {
		t.Fatalf("message %d: answered %v, want [Credit Error Ack]", id, names)
	}
}

func send(t *testing.T, d protocol.Dialer) protocol.Conn {
	t.Helper()
	c, err := d.Send(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(nil) })
	return c
}

// A Send session: Hello, Welcome; messages answered in order, one larger
// than a transport's frame or buffer piece; the agent's CloseSend ends the
// sink's handler normally, and the agent then reads io.EOF.
func testSendSession(t *testing.T, serve Serve) {
	c := send(t, serve(t, NewSvc()))
	Hello(t, c, "a")
	message(t, c, 1, 100_000)
	for id := uint64(2); id <= 10; id++ {
		message(t, c, id, int(id))
	}
	if err := c.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recv(); err != io.EOF {
		t.Fatalf("after CloseSend: %v, want io.EOF", err)
	}
}

// Send may reuse nothing of its frame once it returned: the sender
// overwriting its payload at once does not change what the sink got.
func testSendReusesNothing(t *testing.T, serve Serve) {
	c := send(t, serve(t, NewSvc()))
	Hello(t, c, "a")
	buf := []byte{3, 3, 3}
	if err := c.Send(&protocol.Message{ID: 3, Records: 1, Codec: protocol.CodecZstd, Payload: buf}); err != nil {
		t.Fatal(err)
	}
	buf[0], buf[1], buf[2] = 'x', 'x', 'x'
	for range 3 { // Credit, Error, Ack: the sink found the payload it was sent
		if _, err := c.Recv(); err != nil {
			t.Fatalf("the sink saw the sender's later write: %v", err)
		}
	}
}

// A status the sink ends a session with reaches the agent, with whether
// it is retryable, on Recv and on a later Send; so does a read's.
func testStatusCrossesTheWire(t *testing.T, serve Serve) {
	d := serve(t, NewSvc())
	for _, tc := range refusals {
		c := send(t, d)
		err := c.Send(&protocol.Hello{AgentID: tc.agent, Version: protocol.Version})
		if err == nil {
			_, err = c.Recv()
		}
		if protocol.StatusOf(err) != tc.status || protocol.IsRetryable(err) != tc.retryable {
			t.Fatalf("%s: got %v (status %v)", tc.agent, err, protocol.StatusOf(err))
		}
		if err := c.Send(&protocol.Message{ID: 1, Records: 1, Codec: protocol.CodecZstd}); protocol.StatusOf(err) != tc.status {
			t.Fatalf("%s: send after the end: %v, want status %v", tc.agent, err, tc.status)
		}
		c.Close(nil)
	}
	r, err := d.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(nil)
	_ = r.Send(&protocol.ReadStart{From: 11}) // the refusal may come back here already; Recv says which
	if _, err := r.Recv(); protocol.StatusOf(err) != protocol.StatusOutOfRange {
		t.Fatalf("read: %v, want OutOfRange", err)
	}
}

// A Read session: ReadStart, Stored, Commit, EndOfLog, then io.EOF as
// the sink's handler returns.
func testReadSession(t *testing.T, serve Serve) {
	r, err := serve(t, NewSvc()).Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(nil)
	if err := r.Send(&protocol.ReadStart{From: 3, Group: "g"}); err != nil {
		t.Fatal(err)
	}
	f, err := r.Recv()
	if s, ok := f.(*protocol.Stored); err != nil || !ok || s.Offset != 3 || s.AgentID != "a" || len(s.Records) != 2 || string(s.Records[0]) != "r" || string(s.Records[1]) != "s" {
		t.Fatalf("%#v %v", f, err)
	}
	if err := r.Send(&protocol.Commit{Offset: 3}); err != nil {
		t.Fatal(err)
	}
	f, err = r.Recv()
	if e, ok := f.(*protocol.EndOfLog); err != nil || !ok || e.Next != 4 {
		t.Fatalf("%#v %v", f, err)
	}
	if _, err := r.Recv(); err != io.EOF {
		t.Fatalf("after the handler returned: %v, want io.EOF", err)
	}
}

// The agent's Close ends the sink's end of the session: its context is
// done, so the handler stops.
func testClientCloseEndsHandler(t *testing.T, serve Serve) {
	svc := NewSvc()
	c := send(t, serve(t, svc))
	Hello(t, c, "a")
	sc := <-svc.Started
	c.Close(nil)
	select {
	case <-sc.Context().Done():
	case <-time.After(bound):
		t.Fatal("the sink's session did not end")
	}
}

// Cancelling the context a session was opened with ends it: Recv returns
// Canceled.
func testContextCancelEndsSession(t *testing.T, serve Serve) {
	d := serve(t, NewSvc())
	ctx, cancel := context.WithCancel(context.Background())
	c, err := d.Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(nil)
	Hello(t, c, "a")
	cancel()
	if _, err := c.Recv(); protocol.StatusOf(err) != protocol.StatusCanceled {
		t.Fatalf("Recv after cancel: %v (status %v), want Canceled", err, protocol.StatusOf(err))
	}
	select {
	case <-c.Context().Done():
	case <-time.After(bound):
		t.Fatal("the session's context did not end")
	}
}

// Many sessions at once, each with its own frames in order.
func testManySessions(t *testing.T, serve Serve) {
	d := serve(t, NewSvc())
	const sessions, messages = 50, 20
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- Session(d, fmt.Sprint("a", i), messages)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// Session runs one Send session of n messages against a Svc (for
// goroutines: it returns what went wrong instead of failing the test).
func Session(d protocol.Dialer, agent string, n int) error {
	c, err := d.Send(context.Background())
	if err != nil {
		return err
	}
	defer c.Close(nil)
	if err := c.Send(&protocol.Hello{AgentID: agent, Version: protocol.Version}); err != nil {
		return err
	}
	if f, err := c.Recv(); err != nil {
		return fmt.Errorf("%s: %v", agent, err)
	} else if w, ok := f.(*protocol.Welcome); !ok || w.SessionID != agent {
		return fmt.Errorf("%s: welcome %+v", agent, f)
	}
	for id := uint64(1); id <= uint64(n); id++ {
		payload := make([]byte, 16)
		for i := range payload {
			payload[i] = byte(id)
		}
		if err := c.Send(&protocol.Message{ID: id, Records: 1, Codec: protocol.CodecZstd, Payload: payload}); err != nil {
			return fmt.Errorf("%s: %v", agent, err)
		}
		for range 3 {
			f, err := c.Recv()
			if err != nil {
				return fmt.Errorf("%s: %v", agent, err)
			}
			if a, ok := f.(*protocol.Ack); ok && a.Ranges[0].First != id {
				return fmt.Errorf("%s: ack %v for %d", agent, a.Ranges, id)
			}
		}
	}
	return nil
}
