package rsocket

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// closedErr: a call failed because the connection closed: in flight (its
// stream got ERROR[CONNECTION_ERROR]) or after (ErrClosed).
func closedErr(err error) bool {
	var e *Error
	return errors.Is(err, ErrClosed) || errors.As(err, &e) && e.Code == frame.ErrorCodeConnectionError
}

// Calls racing a Close all return: a request queued while another
// goroutine holds the connection, or after the close, fails with ErrClosed
// instead of waiting forever (nothing is left in the command queue).
func TestCallsRacingCloseAllReturn(t *testing.T) {
	for _, tr := range []string{"mem", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			c, _ := pair(t, tr)
			ctx := tctx(t)
			p := Payload{Data: make([]byte, 64)}
			var wg sync.WaitGroup
			started := make(chan struct{}, 64)
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						if i == 10 {
							started <- struct{}{}
						}
						if _, err := c.RequestResponse(ctx, p); err != nil {
							if !closedErr(err) {
								t.Errorf("after close: %v, want ErrClosed or CONNECTION_ERROR", err)
							}
							return
						}
					}
				}()
			}
			for range 64 {
				<-started
			}
			c.Close()
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("calls still waiting 30 s after Close")
			}
			if _, err := c.RequestResponse(ctx, p); !errors.Is(err, ErrClosed) {
				t.Fatalf("a call after Close: %v, want ErrClosed", err)
			}
		})
	}
}

// waiter's request-response handler waits for its context to end and
// reports why.
type waiter struct {
	UnimplementedResponder
	started chan struct{}
	ended   chan error
}

func (w *waiter) RequestResponse(ctx context.Context, _ Payload) (Payload, error) {
	w.started <- struct{}{}
	<-ctx.Done()
	w.ended <- ctx.Err()
	return Payload{}, ctx.Err()
}

// A responder's handler context ends when the requester cancels (CANCEL)
// and when the connection closes, though it is not derived from the
// connection's context (see handlerCtx).
func TestHandlerContextEnds(t *testing.T) {
	ctx := tctx(t)
	w := &waiter{started: make(chan struct{}, 1), ended: make(chan error, 1)}
	a, b := net.Pipe()
	if _, err := ServeConn(ctx, b, w); err != nil {
		t.Fatal(err)
	}
	c, err := ClientConn(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wait := func(what string) {
		select {
		case err := <-w.ended:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: the handler's context ended with %v", what, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s: the handler's context did not end", what)
		}
	}
	rctx, rcancel := context.WithCancel(ctx)
	go func() { <-w.started; rcancel() }()
	if _, err := c.RequestResponse(rctx, Payload{Data: []byte("x")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	wait("CANCEL")
	go func() { <-w.started; c.Close() }()
	if _, err := c.RequestResponse(ctx, Payload{Data: []byte("y")}); !closedErr(err) {
		t.Fatalf("call on a closed connection: %v", err)
	}
	wait("close")
}
