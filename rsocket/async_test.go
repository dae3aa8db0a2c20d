package rsocket

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestRequestResponseFunc: answers and errors reach the callback exactly
// once, and a callback may send the next request (a chain of 200 on one
// connection, as the async bench does).
func TestRequestResponseFunc(t *testing.T) {
	c, _ := pair(t, "tcp")
	ctx := context.Background()
	type res struct {
		p   Payload
		err error
	}
	got := make(chan res, 4)
	c.RequestResponseFunc(ctx, Payload{Data: []byte("hi")}, func(p Payload, err error) { got <- res{p, err} })
	c.RequestResponseFunc(ctx, Payload{Data: []byte("error:nope")}, func(p Payload, err error) { got <- res{p, err} })
	ok, bad := 0, 0
	for range 2 {
		select {
		case r := <-got:
			var e *Error
			switch {
			case r.err == nil && string(r.p.Data) == "hi":
				ok++
			case errors.As(r.err, &e) && e.Message == "nope":
				bad++
			default:
				t.Fatalf("unexpected answer %q, %v", r.p.Data, r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no answer")
		}
	}
	if ok != 1 || bad != 1 {
		t.Fatalf("ok %d, errors %d", ok, bad)
	}

	done := make(chan error, 1)
	var next func(i int)
	next = func(i int) {
		want := fmt.Sprint(i)
		c.RequestResponseFunc(ctx, Payload{Data: []byte(want)}, func(p Payload, err error) {
			switch {
			case err != nil:
				done <- err
			case string(p.Data) != want:
				done <- fmt.Errorf("got %q, want %q", p.Data, want)
			case i == 199:
				done <- nil
			default:
				next(i + 1)
			}
		})
	}
	next(0)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("chain stalled")
	}
}

// TestRequestResponseFuncCancelAndClose: a cancelled context and a closed
// connection each end the request with an error, once.
func TestRequestResponseFuncCancelAndClose(t *testing.T) {
	c, e := pair(t, "tcp")
	_ = e
	errs := make(chan error, 4)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.RequestResponseFunc(ctx, Payload{Data: []byte("x")}, func(_ Payload, err error) { errs <- err })
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before: %v", err)
	}
	_ = c.Close()
	<-c.Done()
	c.RequestResponseFunc(context.Background(), Payload{Data: []byte("x")}, func(_ Payload, err error) { errs <- err })
	select {
	case err := <-errs:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("after close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no callback after close")
	}
	select {
	case err := <-errs:
		t.Fatalf("second callback: %v", err)
	default:
	}
}

type inlineEcho struct {
	UnimplementedResponder
}

func (inlineEcho) NonBlocking() {}
func (r inlineEcho) RequestResponse(_ context.Context, p Payload) (Payload, error) {
	if string(p.Data) == "panic" {
		panic("boom")
	}
	return p, nil
}

// TestInlineHandlers: a NonBlocking responder answers (from the reader,
// without a copy) and a panic in it is an APPLICATION_ERROR, not a crash.
func TestInlineHandlers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, _, err := Listen("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go Serve(ctx, ln, inlineEcho{})
	c, err := Dial(ctx, "tcp://"+ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		want := fmt.Sprint("x", i)
		p, err := c.RequestResponse(ctx, Payload{Data: []byte(want), Metadata: []byte("m")})
		if err != nil || string(p.Data) != want || string(p.Metadata) != "m" {
			t.Fatalf("got %q %q %v", p.Data, p.Metadata, err)
		}
	}
	_, err = c.RequestResponse(ctx, Payload{Data: []byte("panic")})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("panic: %v", err)
	}
	if _, err := c.RequestResponse(ctx, Payload{Data: []byte("after")}); err != nil {
		t.Fatalf("after the panic: %v", err)
	}
}

// cancelCounter is a responder whose request-response waits until its
// context ends (the requester's CANCEL) and counts those ends.
type cancelCounter struct {
	UnimplementedResponder
	started, cancelled chan struct{}
}

func (r cancelCounter) RequestResponse(ctx context.Context, p Payload) (Payload, error) {
	r.started <- struct{}{}
	<-ctx.Done()
	r.cancelled <- struct{}{}
	return p, nil
}

// valueCtx is a context of a non-pointer type holding a slice: it cannot
// be a map key, so its requests get a watch of their own.
type valueCtx struct {
	context.Context
	tags []string
}

// Many requests made with one context: ending it fails every callback
// with its error, once, and CANCELs every request at the server; the
// connection and its recycled streams keep working after, for plain and
// for non-pointer contexts.
func TestRequestResponseFuncSharedContext(t *testing.T) {
	for _, name := range []string{"pointer", "value"} {
		t.Run(name, func(t *testing.T) {
			const n = 20
			r := cancelCounter{started: make(chan struct{}, n), cancelled: make(chan struct{}, n)}
			c := pairWith(t, "tcp", r)
			base, cancel := context.WithCancel(context.Background())
			var ctx context.Context = base
			if name == "value" {
				ctx = valueCtx{Context: base, tags: []string{"x"}}
			}
			errs := make(chan error, 2*n)
			for range n {
				c.RequestResponseFunc(ctx, Payload{Data: []byte("x")}, func(_ Payload, err error) { errs <- err })
			}
			wait := func(ch chan struct{}, what string) {
				t.Helper()
				for i := range n {
					select {
					case <-ch:
					case <-time.After(30 * time.Second):
						t.Fatalf("%d of %d requests %s", i, n, what)
					}
				}
			}
			wait(r.started, "reached the server")
			cancel()
			for i := range n {
				select {
				case err := <-errs:
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("callback %d: %v", i, err)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("%d of %d callbacks", i, n)
				}
			}
			wait(r.cancelled, "were cancelled at the server")
			select {
			case err := <-errs:
				t.Fatalf("a second callback: %v", err)
			default:
			}
			// The connection works on, with a context of its own.
			ctx2, cancel2 := context.WithCancel(context.Background())
			c.RequestResponseFunc(ctx2, Payload{Data: []byte("y")}, func(_ Payload, err error) { errs <- err })
			select {
			case <-r.started:
			case <-time.After(30 * time.Second):
				t.Fatal("a later request did not reach the server")
			}
			cancel2()
			select {
			case err := <-errs:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("later request: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no callback for the later request")
			}
		})
	}
}
