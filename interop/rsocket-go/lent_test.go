package rsocketgo

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/rsocket/rsocket-go/payload"

	"github.com/sluicehq/sluice/rsocket"
)

// digestOf is what the server answers for an element of a "digest"
// channel: its data's size and SHA-256, and its metadata.
func digestOf(p payload.Payload) string {
	md, _ := p.Metadata()
	return fmt.Sprintf("%d:%x:%s", len(p.Data()), sha256.Sum256(p.Data()), md)
}

// lentPayload is one element of TestOurLentTheirServer's channel.
type lentPayload struct {
	size    int
	md      string
	viaLent bool
}

// lentPayloads: lent ones (64 KiB and more, one frame), copied ones
// (Send; SendLent under 64 KiB) and one over our 1 MiB max frame, which
// SendLent copies and fragments, interleaved on one stream.
var lentPayloads = []lentPayload{
	{64 << 10, "", true}, {200 << 10, "meta-1", true}, {1 << 10, "small", false},
	{300 << 10, "", true}, {256 << 10, "copied-big", false}, {64<<10 - 1, "under", true},
	{512 << 10, "meta-2", true}, {1<<20 + 512<<10, "fragmented", true},
}

// lentBytes is element i's data, regenerated for the comparison: the sent
// slice is cleared once its written callback ran.
func lentBytes(i, size int) []byte {
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(i*131 + j*7 + j>>10)
	}
	return b
}

// TestOurLentTheirServer: our client's Sink.SendLent on a request-channel
// to rsocket-go's server over TCP (lending needs a byte stream), which
// answers each element with its size, SHA-256 and metadata (a digest, not
// an echo: rsocket-go v0.8.16 mis-flags the fragments of large responses).
// Each lent payload's memory is cleared once its written callback ran,
// so digests of the original bytes show the writer had sent them.
func TestOurLentTheirServer(t *testing.T) {
	const tr, name = "tcp", "request-channel, SendLent (64 KiB - 1.5 MiB, lent and copied interleaved)"
	addr := startTheirs(t, tr, newObserved())
	t.Run(tr+"/"+name, func(t *testing.T) {
		record(t, "sluice client → rsocket-go server", tr, name)
		ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
		defer cancel()
		c, err := rsocket.Dial(ctx, "tcp://"+addr, rsocket.WithMaxFrameSize(1<<20))
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		ch, err := c.RequestChannel(ctx, rsocket.Payload{Data: []byte("digest")}, uint32(len(lentPayloads)+1))
		if err != nil {
			t.Fatal(err)
		}
		released := make(chan struct{}, len(lentPayloads)) // one per lent payload cleared
		viaLent := 0
		sent := make(chan error, 1)
		go func() {
			for i, it := range lentPayloads {
				p := rsocket.Payload{Data: lentBytes(i, it.size)}
				if it.md != "" {
					p.Metadata = []byte(it.md)
				}
				if !it.viaLent {
					if err := ch.Send(p); err != nil {
						sent <- err
						return
					}
					continue
				}
				viaLent++
				free := make(chan struct{})
				if err := ch.SendLent(p, func() { close(free) }); err != nil {
					sent <- err
					return
				}
				go func() { <-free; clear(p.Data); released <- struct{}{} }()
			}
			sent <- ch.Complete()
		}()
		got := drainData(t, ch)
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		if len(got) != len(lentPayloads)+1 || got[0] != "digest" {
			t.Fatalf("%d answers (first %q), want the request's echo and %d digests", len(got), got[0], len(lentPayloads))
		}
		for i, it := range lentPayloads {
			want := fmt.Sprintf("%d:%x:%s", it.size, sha256.Sum256(lentBytes(i, it.size)), it.md)
			if got[i+1] != want {
				t.Fatalf("element %d: rsocket-go got %q, we sent %q", i, got[i+1], want)
			}
		}
		for i := 0; i < viaLent; i++ {
			select {
			case <-released:
			case <-ctx.Done():
				t.Fatalf("%d of %d SendLent written callbacks ran", i, viaLent)
			}
		}
		if n := c.PayloadsLent(); n != 4 {
			t.Fatalf("%d payloads lent, want 4 (64 KiB and more, within one frame)", n)
		}
	})
}
