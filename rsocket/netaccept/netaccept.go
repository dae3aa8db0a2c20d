// Package netaccept is the accept loop every sluice RSocket server
// shares (rsocket.Serve, the delivery RSocket listener, rsocket proxy): a
// transient Accept error (EMFILE and the like, which report Timeout)
// backs off, doubling from 5 ms to 1 s, instead of ending the server or
// spinning on the error; the end of the server's context ends the loop
// quietly.
package netaccept

import (
	"context"
	"errors"
	"net"
	"time"
)

// Serve accepts connections on ln until ctx ends (it closes ln then,
// which ends a pending Accept, and returns nil), Accept fails with an
// error that is not transient, or handle returns an error (returned as
// is). handle runs in the accept loop: it starts what takes time in a
// goroutine of its own.
func Serve(ctx context.Context, ln net.Listener, handle func(net.Conn) error) error {
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	var a accepter
	for {
		nc, err := a.accept(ctx, ln)
		if nc == nil {
			return err
		}
		if err := handle(nc); err != nil {
			return err
		}
	}
}

// accepter accepts connections from one listener. The zero value is
// ready; it keeps the current backoff between calls.
type accepter struct {
	delay time.Duration
}

// accept returns the next connection of ln. It returns nil, nil once ctx
// has ended, and any error that is not transient as is.
func (a *accepter) accept(ctx context.Context, ln net.Listener) (net.Conn, error) {
	for {
		nc, err := ln.Accept()
		if err == nil {
			a.delay = 0
			return nc, nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return nil, err
		}
		a.delay = min(max(2*a.delay, 5*time.Millisecond), time.Second)
		select {
		case <-time.After(a.delay):
		case <-ctx.Done():
			return nil, nil
		}
	}
}
