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
		if p.Serve == nil {
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
