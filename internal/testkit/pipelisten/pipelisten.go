// Package pipelisten is a net.Listener of in-memory connections for
// tests of a server's connection bound: it hands the server the far ends
// of net.Pipe connections that Dial makes and records how many of them
// were open (handed out, not yet closed by the server) whenever the
// server asked for another, so a test can tell a bounded server (it stops
// asking at its bound) from an unbounded one without waiting on time.
package pipelisten

import (
	"net"
	"sync"
)

// Listener is the listener; the zero value is not usable: use New.
type Listener struct {
	conns  chan net.Conn
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	open   int
	atMost int // the most open when Accept was called
}

// New returns an open Listener.
func New() *Listener {
	return &Listener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept hands out the next connection Dial made.
func (l *Listener) Accept() (net.Conn, error) {
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

// Close makes Accept fail; connections handed out stay.
func (l *Listener) Close() error { l.once.Do(func() { close(l.done) }); return nil }

// Addr is a loopback address (nothing listens there).
func (l *Listener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// Dial returns the client end once the server has accepted the other.
func (l *Listener) Dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

// MostOpen is the most connections that were open when the server asked
// for another.
func (l *Listener) MostOpen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.atMost
}

type countedConn struct {
	net.Conn
	l    *Listener
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
