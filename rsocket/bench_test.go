package rsocket

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRequestResponse: request-response over one loopback TCP
// connection with 1 and 128 requests in flight; reports req/s and the
// median latency.
func BenchmarkRequestResponse(b *testing.B) {
	for _, inflight := range []int{1, 128} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			c, _ := pair(b, "tcp")
			ctx := context.Background()
			p := Payload{Data: make([]byte, 64)}
			lat := make([][]time.Duration, inflight)
			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := range inflight {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						t := time.Now()
						if _, err := c.RequestResponse(ctx, p); err != nil {
							b.Error(err)
							return
						}
						lat[w] = append(lat[w], time.Since(t))
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(len(all))/el.Seconds(), "req/s")
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
				b.ReportMetric(float64(all[len(all)-1].Microseconds()), "max-µs")
			}
		})
	}
}
