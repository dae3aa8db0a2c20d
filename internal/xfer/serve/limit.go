package serve

import (
	"net"
	"sync"
	"sync/atomic"
)

// DefaultMaxConns bounds the connections each HTTP listener of `xfer
// serve` (tus, POST) serves at once. Beyond it a connection waits in the
// kernel's accept queue, costing us nothing, until one ends. Without a
// bound, 100 clients that each POST half a body and reset, in a loop,
// had thousands of connections accepted at once, each with its request
// buffers, and net/http's buffer pools kept what they had grown to: 366 MB
// RSS, 148 MB live (issue 23 item 6). 1,024 is far more than the upload
// buffer budget (32 MiB, 8 uploads at full speed) serves at full speed,
// and leaves most slots to honest clients while a few hundred hostile
// ones hold theirs until the header or idle timeouts close them.
const DefaultMaxConns = 1024

// limitListener accepts at most max connections open at once: Accept
// waits for a slot before it takes a connection from the kernel.
type limitListener struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
	open  atomic.Int64 // connections accepted and not yet closed
}

func limitConns(ln net.Listener, max int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, max), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
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
	return &limitConn{Conn: c, free: func() { l.open.Add(-1); <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back once, on its first Close.
type limitConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}
