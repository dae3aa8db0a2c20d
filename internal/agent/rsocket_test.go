package agent

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/testkit/faultproxy"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
	"github.com/sluicehq/sluice/internal/transport/rsockettransport"
)

// serveRSocket serves svc over RSocket on loopback and returns the
// agent's --sink for it, through a fault proxy that can cut the agent's
// connections.
func serveRSocket(t *testing.T, svc protocol.Service, opts ...rsockettransport.Option) (string, *faultproxy.Proxy) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := faultproxy.New(t, ln.Addr().String())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rsockettransport.Serve(ctx, ln, svc, opts...) }()
	t.Cleanup(func() { cancel(); p.CloseAll(); <-done })
	return RSocketScheme + "tcp://" + p.Addr(), p
}

// TestDeliversOverRSocket: --sink rsocket+tcp://… delivers every record
// exactly once, across a connection cut mid-delivery (the agent dials
// again and resends what was not acknowledged; the sink deduplicates).
func TestDeliversOverRSocket(t *testing.T) {
	svc := newFakeService()
	addr, link := serveRSocket(t, svc)
	a := newTestAgent(t, filepath.Join(t.TempDir(), "spool"), func(c *Config) {
		c.SinkAddr = addr
		c.ReconnectMin, c.ReconnectMax = time.Millisecond, 10*time.Millisecond
		c.Linger = time.Millisecond
	})
	defer a.Close()
	want := ingestN(t, a, "first", 50)
	waitAcked(t, a)
	link.CutAll()
	for k, v := range ingestN(t, a, "second", 50) {
		want[k] = v
	}
	waitAcked(t, a)
	sessions, stored, _ := svc.snapshot()
	sameCounts(t, stored, want)
	if sessions < 2 {
		t.Errorf("%d sessions after a cut connection, want at least 2", sessions)
	}
}

// TestRSocketSinkAddressErrors: a malformed RSocket sink address fails New.
func TestRSocketSinkAddressErrors(t *testing.T) {
	for _, bad := range []string{"rsocket+http://x:1", "rsocket+tcp://"} {
		cfg := Config{SinkAddr: bad, SpoolDir: filepath.Join(t.TempDir(), "spool"), Logger: quietLog}
		if a, err := New(cfg); err == nil {
			a.Close()
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestResendsPerFlap measures, over each transport, how many messages a
// connection cut costs in resends while records flow, and checks every
// record is stored exactly once. Without resumption the agent resends
// what was unacknowledged when the connection broke; with it
// (rsocket+resume: --rsocket-resume on both ends) the session outlives
// the connection and nothing is resent.
func TestResendsPerFlap(t *testing.T) {
	for _, tr := range []string{"grpc", "rsocket", "rsocket+resume"} {
		t.Run(tr, func(t *testing.T) {
			svc := newFakeService()
			var addr string
			var link *faultproxy.Proxy
			switch tr {
			case "rsocket":
				addr, link = serveRSocket(t, svc)
			case "rsocket+resume":
				addr, link = serveRSocket(t, svc, rsockettransport.WithResume())
			default:
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				link = faultproxy.New(t, ln.Addr().String())
				s := grpc.NewServer()
				grpctransport.Register(s, svc)
				go s.Serve(ln)
				t.Cleanup(s.Stop)
				addr = link.Addr()
			}
			a := newTestAgent(t, filepath.Join(t.TempDir(), "spool"), func(c *Config) {
				c.SinkAddr = addr
				c.ReconnectMin, c.ReconnectMax = time.Millisecond, 10*time.Millisecond
				c.Linger = time.Millisecond
				c.RSocketResume = tr == "rsocket+resume"
			})
			defer a.Close()
			const flaps, perFlap = 10, 50
			want := map[string]int{}
			for i := range flaps {
				// Cut once something of this round was acknowledged: the
				// cut may land mid-delivery (or after it: a measurement,
				// not a guarantee).
				before := a.Progress().AckedMessages
				for k, v := range ingestN(t, a, fmt.Sprint("f", i), perFlap) {
					want[k] = v
				}
				testwait.For(t, "more messages acknowledged", func() bool { return a.Progress().AckedMessages > before })
				link.CutAll()
			}
			waitAcked(t, a)
			_, stored, _ := svc.snapshot()
			sameCounts(t, stored, want)
			st := a.Stats()
			sessions, _, _ := svc.snapshot()
			t.Logf("%s: %d flaps, %d sessions, %d messages sent, %d resent: %.1f resends per flap", tr, flaps, sessions, st.Sent, st.Resent, float64(st.Resent)/flaps)
			if tr == "rsocket+resume" && (st.Resent != 0 || sessions != 1) {
				t.Errorf("with resumption: %d resent, %d sessions; want nothing resent and the one session kept", st.Resent, sessions)
			}
		})
	}
}
