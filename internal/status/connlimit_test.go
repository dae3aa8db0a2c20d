package status

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// pipeListener hands out the server ends of net.Pipe connections that
// dial makes, and records how many of those were open (handed out, not
// yet closed by the server) each time the server asked for another.
type pipeListener struct {
	conns  chan net.Conn
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	open   int
	atMost int // the most open when Accept was called
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	l.atMost = max(l.atMost, l.open)
	l.mu.Unlock()
	select {
	case c := <-l.conns:
		l.mu.Lock()
		l.open++
		l.mu.Unlock()
		return &countedConn{Conn: c, l: l}, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// dial returns the client end once the server has accepted the other.
func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

type countedConn struct {
	net.Conn
	l    *pipeListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// TestServeBoundsConnections: the metrics and status listener takes no
// connection beyond MaxConns open at once (the rest wait in the kernel's
// accept queue), and takes the next as soon as one ends. Before, it took
// every one at once: 100 clients resetting mid-request in a loop had
// thousands open, and the Go runtime keeps what such a peak grew
// (docs/reliability.md, "Hostile clients on every listener").
func TestServeBoundsConnections(t *testing.T) {
	ln := newPipeListener()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	Serve(ctx, ln, prometheus.NewRegistry(), slog.New(slog.DiscardHandler), nil, nil)
	clients := make([]net.Conn, 0, MaxConns)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range MaxConns {
		clients = append(clients, ln.dial()) // silent: each holds its slot
	}
	// One goes: the server ends it and takes the next.
	clients[0].Close()
	clients = append(clients[1:], ln.dial())
	ln.mu.Lock()
	atMost := ln.atMost
	ln.mu.Unlock()
	if atMost >= MaxConns {
		t.Fatalf("the server asked for another connection with %d open, want fewer than %d", atMost, MaxConns)
	}
}
