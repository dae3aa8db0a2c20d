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
	var a accepter
	ctx := context.Background()
	nc, err := a.accept(ctx, l)
	if err != nil || nc != c1 {
		t.Fatalf("after two transient errors: %v, %v; want the connection", nc, err)
	}
	if a.delay != 0 {
		t.Fatalf("backoff %v after a connection, want it reset", a.delay)
	}
	if _, err := a.accept(ctx, l); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("closed listener: %v, want net.ErrClosed", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if nc, err := a.accept(cctx, &fakeListener{}); nc != nil || err != nil {
		t.Fatalf("ended context: %v, %v; want nil, nil", nc, err)
	}
	l = &fakeListener{errs: []error{timeoutErr{}}}
	cctx, cancel = context.WithCancel(ctx)
	cancel()
	if nc, err := a.accept(cctx, l); nc != nil || err != nil {
		t.Fatalf("transient error after the context ended: %v, %v; want nil, nil", nc, err)
	}
}

// TestServe: each connection goes to handle; an error from handle ends
// Serve with it; the end of the context ends Serve with nil and closes
// the listener.
func TestServe(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	stopErr := errors.New("handler failed")
	var got []net.Conn
	err := Serve(context.Background(), &fakeListener{conns: []net.Conn{c1, c2}}, func(nc net.Conn) error {
		got = append(got, nc)
		if len(got) == 2 {
			return stopErr
		}
		return nil
	})
	if !errors.Is(err, stopErr) || len(got) != 2 {
		t.Fatalf("Serve: %v after %d connections, want the handler's error after 2", err, len(got))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, func(net.Conn) error { return nil }) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after its context ended: %v, want nil", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("listener after Serve: %v, want closed", err)
	}
}
