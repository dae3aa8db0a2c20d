package rr

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Every in-process protocol echoes, under concurrency, the payload of each
// call back to that call.
func TestProtocolsEcho(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, p := range Protocols {
		if p.Serve == nil || p.Dial == nil {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			addr, stop, err := p.Serve(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			c, err := p.Dial(ctx, addr, DialOptions{Conns: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for w := 0; w < 16; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 20; i++ {
						want := []byte(fmt.Sprintf("w%d-i%d-%s", w, i, bytes.Repeat([]byte{'x'}, w*100)))
						got, err := c.Call(ctx, want)
						if err != nil {
							errs <- err
							return
						}
						if !bytes.Equal(got, want) {
							errs <- fmt.Errorf("got %q, want %q", got, want)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		})
	}
}

// BenchmarkClosed128 drives each in-process protocol with 128 requests in
// flight on one client (for profiles: go test -run X -bench Closed128/rsocket
// -cpuprofile cpu.out ./internal/lab/bench/rr/).
func BenchmarkClosed128(b *testing.B) {
	ctx := context.Background()
	payload := bytes.Repeat([]byte{'a'}, 64)
	for _, p := range Protocols {
		if p.Serve == nil || p.Dial == nil {
			continue
		}
		b.Run(p.Name, func(b *testing.B) {
			addr, stop, err := p.Serve(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer stop()
			c, err := p.Dial(ctx, addr, DialOptions{Conns: 128})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.SetParallelism(64)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Call(ctx, payload); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// Every row whose server or client is not sluice's in-process one has a
// peer to run it, and every peer's row exists: a row without either would
// start nothing (the Redis rows moved to interop/redis this way).
func TestPeersCoverTheRowsWithoutServeOrDial(t *testing.T) {
	for _, p := range Protocols {
		_, ok := Peers[p.Name]
		if (p.Serve == nil || p.Dial == nil) != ok {
			t.Errorf("%s: Serve nil %v, Dial nil %v, has a peer %v", p.Name, p.Serve == nil, p.Dial == nil, ok)
		}
		if peer := Peers[p.Name]; ok && p.Dial == nil && len(peer.Client) == 0 {
			t.Errorf("%s: the peer drives its load but no client is named", p.Name)
		}
	}
	for name := range Peers {
		if _, ok := Lookup(name); !ok {
			t.Errorf("peer row %s is no protocol", name)
		}
	}
}
