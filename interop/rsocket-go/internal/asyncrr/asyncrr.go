// Package asyncrr drives rsocket-go's request-response on its fast path,
// the one its own echo benchmark uses (examples/echo_bench/echo_bench.go in
// github.com/rsocket/rsocket-go: RequestResponse(p).SubscribeWith(ctx, sub)
// from one goroutine, no Block, so no copy of the reply and no goroutine
// parked per request in flight).
package asyncrr

import (
	"context"
	"fmt"
	"time"

	rgo "github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx"
)

// Closed keeps inflight requests outstanding until end: one goroutine
// issues a request whenever a reply (or error) comes back, as a closed
// loop. record is called once per finished request, from that goroutine.
// It returns once every outstanding request has finished.
func Closed(ctx context.Context, c rgo.Client, data []byte, inflight int, end time.Time, record func(time.Duration, error)) {
	type done struct {
		d   time.Duration
		err error
	}
	// Every request in flight can finish without blocking rsocket-go's
	// reader goroutine, which runs the callbacks.
	finished := make(chan done, inflight)
	start := func() {
		t0 := time.Now()
		var size = -1
		c.RequestResponse(payload.New(data, nil)).SubscribeWith(ctx, rx.NewSubscriber(
			// The reply is valid only during this callback: check its size
			// here, keep nothing.
			rx.OnNext(func(p payload.Payload) error { size = len(p.Data()); return nil }),
			rx.OnError(func(err error) { finished <- done{time.Since(t0), err} }),
			rx.OnComplete(func() {
				var err error
				if size != len(data) {
					err = fmt.Errorf("reply of %d bytes to %d", size, len(data))
				}
				finished <- done{time.Since(t0), err}
			}),
		))
	}
	outstanding := 0
	for ; outstanding < inflight && time.Now().Before(end); outstanding++ {
		start()
	}
	for outstanding > 0 {
		var f done
		select {
		case f = <-finished:
		case <-ctx.Done():
			return
		}
		outstanding--
		record(f.d, f.err)
		if time.Now().Before(end) {
			start()
			outstanding++
		}
	}
}
