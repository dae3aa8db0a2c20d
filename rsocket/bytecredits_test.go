package rsocket

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
)

// bigStreamer answers a stream with count elements of size bytes, element
// i filled with byte i, counting what Send accepted.
type bigStreamer struct {
	UnimplementedResponder
	count, size int
	sent        atomic.Int64
	done        chan struct{}
}

func (b *bigStreamer) RequestStream(ctx context.Context, _ Payload, out *Sink) error {
	defer close(b.done)
	for i := 0; i < b.count; i++ {
		if err := out.Send(Payload{Data: bytes.Repeat([]byte{byte(i)}, b.size)}); err != nil {
			return err
		}
		b.sent.Add(1)
	}
	return nil
}

// bytePair connects a client and a server over TCP with their own options.
func bytePair(t *testing.T, r Responder, client, server []Option) *Conn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go Serve(ctx, ln, r, server...)
	c, err := Dial(ctx, "tcp://"+ln.Addr().String(), client...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestByteCreditsBoundReceiver: 200 elements of 64 KiB with 200 item
// credits granted at once. With byte credits of 256 KiB the responder is
// never more than the window plus one element ahead of what the
// application consumed; every element arrives intact.
func TestByteCreditsBoundReceiver(t *testing.T) {
	const count, size, window = 200, 64 << 10, 256 << 10
	b := &bigStreamer{count: count, size: size, done: make(chan struct{})}
	c := bytePair(t, b, []Option{WithByteCredits(window)}, []Option{WithByteCredits(1 << 20)})
	s, err := c.RequestStream(tctx(t), Payload{Data: []byte("go")}, count)
	if err != nil {
		t.Fatal(err)
	}
	maxAhead := int64(0)
	for i := 0; i < count; i++ {
		p, err := s.Next()
		if err != nil {
			t.Fatalf("element %d: %v", i, err)
		}
		if len(p.Data) != size || p.Data[0] != byte(i) || p.Data[size-1] != byte(i) {
			t.Fatalf("element %d: %d bytes starting %d", i, len(p.Data), p.Data[0])
		}
		// Consumed i+1; the sender may be ahead by the window (4
		// elements) plus the one its positive credit let through, plus the
		// grant Next just posted for half a window (2 elements).
		ahead := b.sent.Load() - int64(i+1)
		maxAhead = max(maxAhead, ahead)
		if ahead > window/size+1+window/size/2 {
			t.Fatalf("after consuming %d the responder had sent %d: %d elements (%d KiB) ahead", i+1, b.sent.Load(), ahead, ahead*size>>10)
		}
	}
	t.Logf("the responder was at most %d elements (%d KiB) ahead of the consumer", maxAhead, maxAhead*size>>10)
}

// TestByteCreditsStandardPeer: with the extension on one end only, the
// other end is a plain RSocket peer and the stream runs on item credits
// alone: the responder sends all 200 elements before the requester reads
// any (they were all granted).
func TestByteCreditsStandardPeer(t *testing.T) {
	const count, size = 200, 16 << 10
	for _, tc := range []struct {
		name           string
		client, server []Option
	}{
		{"client has it, server does not", []Option{WithByteCredits(size)}, nil},
		{"server has it, client does not", nil, []Option{WithByteCredits(size)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &bigStreamer{count: count, size: size, done: make(chan struct{})}
			c := bytePair(t, b, tc.client, tc.server)
			ctx := tctx(t)
			s, err := c.RequestStream(ctx, Payload{Data: []byte("go")}, count)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-b.done:
			case <-ctx.Done():
				t.Fatalf("the responder stopped after %d elements: byte credits applied to a plain peer", b.sent.Load())
			}
			for i := 0; i < count; i++ {
				if p, err := s.Next(); err != nil || len(p.Data) != size || p.Data[0] != byte(i) {
					t.Fatalf("element %d: %d bytes, %v", i, len(p.Data), err)
				}
			}
		})
	}
}
