// Package netaccept is the accept loop every sluice server shares: a
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

// Accepter accepts connections from one listener. The zero value is
// ready; it keeps the current backoff between calls.
type Accepter struct {
	delay time.Duration
}

// Accept returns the next connection of ln. It returns nil, nil once ctx
// has ended (the server closes ln when ctx ends, which ends a pending
// Accept), and any error that is not transient as is.
func (a *Accepter) Accept(ctx context.Context, ln net.Listener) (net.Conn, error) {
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
