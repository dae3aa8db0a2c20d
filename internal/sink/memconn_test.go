package sink

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/transport/memconn"
)

// The sink is a protocol.Service: these tests drive it over memconn, with
// no gRPC in between, as the simulation and a second transport will.

func memSend(t *testing.T, d *memconn.Dialer, agent string) (protocol.Conn, *protocol.Welcome) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	c, err := d.Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(&protocol.Hello{AgentID: agent, Version: protocol.Version, Codecs: []protocol.Codec{protocol.CodecPlain}}); err != nil {
		t.Fatal(err)
	}
	f, err := c.Recv()
	if err != nil {
		return c, nil
	}
	w, ok := f.(*protocol.Welcome)
	if !ok {
		t.Fatalf("first frame %s, want Welcome", protocol.Name(f))
	}
	return c, w
}

// TestServeSendMemconn: a session over memconn stores and acks, refuses a
// bad message alone (with its credit handed back in the same step), and
// the store holds what was acked.
func TestServeSendMemconn(t *testing.T) {
	h := newHarness(t, nil)
	d := &memconn.Dialer{Service: h.s}
	c, w := memSend(t, d, "edge-1")
	if w == nil || w.Credits.Messages == 0 {
		t.Fatalf("welcome %+v", w)
	}
	if err := c.Send(&protocol.Message{ID: 1, Records: 2, Codec: protocol.CodecPlain, Payload: sinkclient.Body("a", "b")}); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(&protocol.Message{ID: 2, Records: 1, Codec: protocol.CodecPlain, Payload: []byte("not a batch")}); err != nil {
		t.Fatal(err)
	}
	acked, refused, credit := false, false, false
	for !acked || !refused {
		f, err := c.Recv()
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *protocol.Ack:
			acked = acked || f.Ranges[0].First <= 1 && 1 <= f.Ranges[0].Last
		case *protocol.Credit:
			credit = credit || f.Credits != nil
		case *protocol.Error:
			if f.MessageID != 2 || f.Code != protocol.CodeBadPayload || f.Retryable {
				t.Fatalf("error %+v", f)
			}
			if !credit {
				t.Fatal("the refusal came without the credit it hands back (memconn splits it into a Credit first)")
			}
			refused = true
		}
	}
	if err := c.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if got := h.stored(); len(got) != 1 || got[0] != "edge-1/1" {
		t.Fatalf("stored %v", got)
	}
}

// TestServeSendMemconnToken: the token a transport reports binds the
// agent id, as the gRPC interceptor's identity does.
func TestServeSendMemconnToken(t *testing.T) {
	tokens, err := auth.ParseTokens(strings.NewReader("tok-edge-1-0123456789 edge-1\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.Tokens = tokens })
	d := &memconn.Dialer{Service: h.s, Peer: protocol.PeerInfo{Addr: "mem", Token: "tok-edge-1-0123456789"}}
	if _, w := memSend(t, d, "edge-1"); w == nil {
		t.Fatal("edge-1's token was refused for edge-1")
	}
	if got := h.s.Agents(); len(got) != 1 || got[0].ID != "edge-1" || got[0].Vouched != "token" {
		t.Fatalf("agents %+v, want edge-1 vouched for by its token", got)
	}
	c, w := memSend(t, d, "edge-2")
	if w != nil {
		t.Fatal("edge-1's token was welcomed as edge-2")
	}
	if _, err := c.Recv(); protocol.StatusOf(err) != protocol.StatusPermissionDenied {
		t.Fatalf("edge-1's token as edge-2: %v, want PermissionDenied", err)
	}
	if got := h.s.Agents(); len(got) != 1 {
		t.Fatalf("agents %+v: a refused session must not be listed", got)
	}
	d.Peer.Token = ""
	c, _ = memSend(t, d, "edge-1")
	if _, err := c.Recv(); protocol.StatusOf(err) != protocol.StatusUnauthenticated {
		t.Fatalf("no token: %v, want Unauthenticated", err)
	}
}

// TestServeReadMemconn: a consumer's Read session over memconn gets the
// stored messages within its credit, then EndOfLog, and a commit sticks.
func TestServeReadMemconn(t *testing.T) {
	h := newHarness(t, nil)
	a := h.connect("edge-1")
	for id := uint64(1); id <= 3; id++ {
		a.Send(sinkclient.PlainRequest(id, sinkclient.Records(id, 2)...))
	}
	a.Collect(1, 2, 3)
	d := &memconn.Dialer{Service: h.s}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := d.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []protocol.Frame{&protocol.ReadStart{Group: "g"}, &protocol.ReadMore{N: 10}} {
		if err := c.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	var got []uint64
	for {
		f, err := c.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := f.(*protocol.EndOfLog); ok {
			if e.Next != 3 {
				t.Fatalf("EndOfLog at %d, want 3", e.Next)
			}
			break
		}
		m := f.(*protocol.Stored)
		if m.AgentID != "edge-1" || len(m.Records) != 2 {
			t.Fatalf("stored %+v", m)
		}
		got = append(got, m.MessageID)
	}
	if len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("read messages %v, want 1 2 3", got)
	}
	if err := c.Send(&protocol.Commit{Offset: 3}); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseSend(); err != nil {
		t.Fatal(err)
	}
	// The session ends once the commit is applied.
	if _, err := c.Recv(); err != io.EOF {
		t.Fatalf("after CloseSend: %v, want io.EOF", err)
	}
	if off, ok, err := h.s.reader.Committed("g"); err != nil || !ok || off != 3 {
		t.Fatalf("group g at %d (%v, %v), want 3", off, ok, err)
	}
}

// TestCloseWaitsForMemconnSessions: Close while sessions of a transport
// other than gRPC are sending. GracefulStop knows only gRPC's handlers;
// before Close waited for every session, a session still running sent on
// the writer's closed channel and the process panicked.
func TestCloseWaitsForMemconnSessions(t *testing.T) {
	h := newHarness(t, nil)
	d := &memconn.Dialer{Service: h.s}
	stop := make(chan struct{})
	done := make(chan struct{})
	const agents = 4
	for a := 0; a < agents; a++ {
		c, w := memSend(t, d, "edge-"+string(rune('a'+a)))
		if w == nil {
			t.Fatal("no welcome")
		}
		go func() { // drain acks so the session never blocks on us
			for {
				if _, err := c.Recv(); err != nil {
					return
				}
			}
		}()
		go func() {
			defer func() { done <- struct{}{} }()
			for id := uint64(1); ; id++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := c.Send(&protocol.Message{ID: id, Records: 1, Codec: protocol.CodecPlain, Payload: sinkclient.Body("r")}); err != nil {
					return // the sink ended the session
				}
			}
		}()
	}
	if err := h.s.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	for a := 0; a < agents; a++ {
		<-done
	}
	if _, err := d.Send(context.Background()); err == nil {
		c, _ := d.Send(context.Background())
		c.Send(&protocol.Hello{AgentID: "late", Version: protocol.Version})
		if _, err := c.Recv(); protocol.StatusOf(err) != protocol.StatusUnavailable {
			t.Fatalf("a session after Close: %v, want Unavailable", err)
		}
	}
}

// TestReplacedAcrossTransports (issue 23): one live Send session per
// agent id whatever carries it: a gRPC Hello replaces the agent's session
// over another transport (memconn here, as RSocket), which ends with
// StatusAborted, and the replaced agent's resend on gRPC is acked.
func TestReplacedAcrossTransports(t *testing.T) {
	h := newHarness(t, nil)
	d := &memconn.Dialer{Service: h.s, Peer: protocol.PeerInfo{Addr: "mem"}}
	c, w := memSend(t, d, "edge-1")
	if w == nil {
		t.Fatal("no Welcome over memconn")
	}
	a := h.connect("edge-1")
	for {
		_, err := c.Recv()
		if err == nil {
			continue
		}
		if protocol.StatusOf(err) != protocol.StatusAborted || !strings.Contains(err.Error(), "replaced by a newer session") {
			t.Fatalf("the memconn session after a gRPC Hello of its agent: %v, want Aborted", err)
		}
		break
	}
	a.Send(sinkclient.PlainRequest(1, "resent"))
	a.Collect(1)
	// The replaced session's client hears Aborted before that session's
	// goroutine has ended and counted itself out: wait for the count (a
	// CI run read 2 right after the resend's ack).
	testwait.For(t, "edge-1 with 1 session", func() bool {
		got := h.s.Agents()
		return len(got) == 1 && got[0].Connected == 1
	})
}
