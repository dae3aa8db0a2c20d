package netaccept

import (
	"context"
	"errors"
	"net"
	"testing"
)

// fakeListener hands out errs, then conns.
type fakeListener struct {
	net.Listener
	errs  []error
	conns []net.Conn
}

func (l *fakeListener) Accept() (net.Conn, error) {
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		return nil, err
	}
	if len(l.conns) > 0 {
		c := l.conns[0]
		l.conns = l.conns[1:]
		return c, nil
	}
	return nil, net.ErrClosed
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "accept: too many open files" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestAccept: transient errors are waited out, a connection comes
// through, a closed listener's error is returned, and an ended context
// ends the loop without an error.
func TestAccept(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	l := &fakeListener{errs: []error{timeoutErr{}, timeoutErr{}}, conns: []net.Conn{c1}}
	var a Accepter
	ctx := context.Background()
	nc, err := a.Accept(ctx, l)
	if err != nil || nc != c1 {
		t.Fatalf("after two transient errors: %v, %v; want the connection", nc, err)
	}
	if a.delay != 0 {
		t.Fatalf("backoff %v after a connection, want it reset", a.delay)
	}
	if _, err := a.Accept(ctx, l); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("closed listener: %v, want net.ErrClosed", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if nc, err := a.Accept(cctx, &fakeListener{}); nc != nil || err != nil {
		t.Fatalf("ended context: %v, %v; want nil, nil", nc, err)
	}
	l = &fakeListener{errs: []error{timeoutErr{}}}
	cctx, cancel = context.WithCancel(ctx)
	cancel()
	if nc, err := a.Accept(cctx, l); nc != nil || err != nil {
		t.Fatalf("transient error after the context ended: %v, %v; want nil, nil", nc, err)
	}
}
