package agent

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/protocol"
	rstransport "github.com/sluicehq/sluice/internal/transport/rsocket"
)

// killListener remembers accepted connections so a test can cut them.
type killListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *killListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *killListener) kill() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// serveRSocket serves svc over RSocket on loopback and returns the
// agent's --sink for it.
func serveRSocket(t *testing.T, svc protocol.Service) (string, *killListener) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &killListener{Listener: raw}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rstransport.Serve(ctx, ln, svc) }()
	t.Cleanup(func() { cancel(); ln.kill(); <-done })
	return RSocketScheme + "tcp://" + raw.Addr().String(), ln
}

// TestDeliversOverRSocket: --sink rsocket+tcp://… delivers every record
// exactly once, across a connection cut mid-delivery (the agent dials
// again and resends what was not acknowledged; the sink deduplicates).
func TestDeliversOverRSocket(t *testing.T) {
	svc := newFakeService()
	addr, ln := serveRSocket(t, svc)
	a := newTestAgent(t, filepath.Join(t.TempDir(), "spool"), func(c *Config) {
		c.SinkAddr = addr
		c.ReconnectMin, c.ReconnectMax = time.Millisecond, 10*time.Millisecond
		c.Linger = time.Millisecond
	})
	defer a.Close()
	want := ingestN(t, a, "first", 50)
	waitAcked(t, a, 30*time.Second)
	ln.kill()
	for k, v := range ingestN(t, a, "second", 50) {
		want[k] = v
	}
	waitAcked(t, a, 30*time.Second)
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
