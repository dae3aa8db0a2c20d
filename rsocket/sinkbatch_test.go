package rsocket

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
)

// batcher streams "0" … "n-1" with SendBatch in batches of 10 and reports
// how the handler ended.
type batcher struct {
	UnimplementedResponder
	done chan error
	sent chan int
}

func (b *batcher) RequestStream(_ context.Context, p Payload, out *Sink) error {
	n, _ := strconv.Atoi(string(p.Data))
	ps := make([]Payload, 0, 10)
	total := 0
	for i := 0; i < n; {
		ps = ps[:0]
		for j := i; j < min(i+10, n); j++ {
			ps = append(ps, Payload{Data: []byte(strconv.Itoa(j))})
		}
		k, err := out.SendBatch(ps)
		total += k
		if err != nil {
			b.sent <- total
			b.done <- err
			return err
		}
		i += len(ps)
	}
	b.sent <- total
	b.done <- nil
	return nil
}

// SendBatch sends every payload in order while the requester grants
// credits 3 at a time (so batches wait for credits mid-way), and fails
// once the requester cancelled, saying how many were sent.
func TestSendBatch(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			ctx := tctx(t)
			b := &batcher{done: make(chan error, 2), sent: make(chan int, 2)}
			c := pairWith(t, tr, b)
			s, err := c.RequestStream(ctx, Payload{Data: []byte("95")}, 3)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 95 {
				p, err := s.Next()
				if err != nil {
					t.Fatalf("element %d: %v", i, err)
				}
				if string(p.Data) != strconv.Itoa(i) {
					t.Fatalf("element %d is %q", i, p.Data)
				}
			}
			if _, err := s.Next(); err != io.EOF {
				t.Fatalf("after the last element: %v, want io.EOF", err)
			}
			if err := <-b.done; err != nil {
				t.Fatal(err)
			}
			if n := <-b.sent; n != 95 {
				t.Fatalf("SendBatch reported %d sent", n)
			}

			// Cancelled by the requester: SendBatch fails.
			sctx, cancel := context.WithCancel(ctx)
			s, err = c.RequestStream(sctx, Payload{Data: []byte("1000000")}, 4)
			if err != nil {
				t.Fatal(err)
			}
			for range 7 {
				if _, err := s.Next(); err != nil {
					t.Fatal(err)
				}
			}
			cancel()
			select {
			case err := <-b.done:
				if err == nil || !errors.Is(err, context.Canceled) && !errors.Is(err, ErrClosed) {
					t.Fatalf("SendBatch after cancel: %v", err)
				}
			case <-ctx.Done():
				t.Fatal("SendBatch did not fail after the cancel")
			}
			if n := <-b.sent; n < 7 || n > 1000000 {
				t.Fatalf("SendBatch reported %d sent", n)
			}
		})
	}
}

// pairWith connects a client to a server with responder r.
func pairWith(t *testing.T, transport string, r Responder) *Conn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var c *Conn
	var err error
	switch transport {
	case "mem":
		a, b := net.Pipe()
		if _, err := ServeConn(ctx, b, r); err != nil {
			t.Fatal(err)
		}
		c, err = ClientConn(ctx, a)
	case "tcp":
		ln, _, lerr := Listen("tcp://127.0.0.1:0")
		if lerr != nil {
			t.Fatal(lerr)
		}
		go Serve(ctx, ln, r)
		c, err = Dial(ctx, "tcp://"+ln.Addr().String())
	case "ws":
		ln, path, lerr := Listen("ws://127.0.0.1:0/rsocket")
		if lerr != nil {
			t.Fatal(lerr)
		}
		go ServeWebSocket(ctx, ln, path, r)
		c, err = Dial(ctx, "ws://"+ln.Addr().String()+path)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
