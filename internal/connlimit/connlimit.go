// Package connlimit bounds the connections a listener serves at once.
//
// Beyond the bound a connection waits in the kernel's accept queue,
// costing the server nothing, until one of those served ends. Without a
// bound, clients that send half a request and reset, in a loop, had
// thousands of connections accepted at once under load, each with its
// goroutine, its request buffers and its poll descriptor, and the Go
// runtime keeps what such a peak made it grow for the process's life
// (goroutine records, poll descriptors, span metadata): issue 23 item 6,
// docs/reliability.md "Hostile clients on every listener".
package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
)

// Listener accepts at most its bound of connections open at once: Accept
// waits for a slot before it takes a connection from the kernel. Use New.
type Listener struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
	open  atomic.Int64 // connections accepted and not yet closed
}

// New returns ln serving at most max connections at once.
func New(ln net.Listener, max int) *Listener {
	return &Listener{Listener: ln, slots: make(chan struct{}, max), done: make(chan struct{})}
}

// Open is the number of connections accepted and not yet closed.
func (l *Listener) Open() int64 { return l.open.Load() }

// Accept waits for a free slot, then accepts.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	l.open.Add(1)
	return &conn{Conn: c, free: func() { l.open.Add(-1); <-l.slots }}, nil
}

// Close closes the listener and ends an Accept waiting for a slot.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// conn gives its slot back once, on its first Close.
type conn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}
