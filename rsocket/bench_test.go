package rsocket

import (
	"context"

	"net"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRequestResponse: request-response over one loopback TCP
// connection with 1 and 128 requests in flight; reports req/s and the
// median latency.
func BenchmarkRequestResponse(b *testing.B) {
	for _, v := range []struct {
		name     string
		inflight int
		opts     []Option
	}{{"inflight=1", 1, nil}, {"inflight=128", 128, nil}, {"inflight=128/inline", 128, []Option{WithInlineHandlers()}}} {
		inflight := v.inflight
		b.Run(v.name, func(b *testing.B) {
			c, _ := pair(b, "tcp", v.opts...)
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

// BenchmarkRequestResponseAsync: 128 in flight with RequestResponseFunc
// (each answer's callback sends the next request), inline handlers.
func BenchmarkRequestResponseAsync(b *testing.B) {
	const inflight = 128
	c, _ := pair(b, "tcp", WithInlineHandlers())
	ctx := context.Background()
	p := Payload{Data: make([]byte, 64)}
	var left atomic.Int64
	left.Store(int64(b.N))
	done := make(chan struct{})
	var outstanding atomic.Int64
	var send func()
	send = func() {
		if left.Add(-1) < 0 {
			if outstanding.Add(-1) == 0 {
				close(done)
			}
			return
		}
		c.RequestResponseFunc(ctx, p, func(_ Payload, err error) {
			if err != nil {
				b.Error(err)
			}
			send()
		})
	}
	b.ResetTimer()
	start := time.Now()
	outstanding.Store(inflight)
	for range inflight {
		send()
	}
	<-done
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// streamer streams len(elem)-byte payloads: data "n" asks for n of them.
// With batch, it sends with SendBatch, 64 at a time.
type streamer struct {
	UnimplementedResponder
	elem  []byte
	batch bool
}

func (s streamer) RequestStream(_ context.Context, p Payload, out *Sink) error {
	n, err := strconv.Atoi(string(p.Data))
	if err != nil {
		return err
	}
	if s.batch {
		var ps [64]Payload
		for i := range ps {
			ps[i] = Payload{Data: s.elem}
		}
		for n > 0 {
			k := min(n, len(ps))
			if _, err := out.SendBatch(ps[:k]); err != nil {
				return err
			}
			n -= k
		}
		return nil
	}
	for range n {
		if err := out.Send(Payload{Data: s.elem}); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkRequestStream: one stream of 64 B payloads over loopback TCP,
// credits in batches of 256; one op is one payload received. send=batch:
// the responder uses SendBatch.
func BenchmarkRequestStream(b *testing.B) {
	b.Run("send=one", func(b *testing.B) { benchStream(b, false) })
	b.Run("send=batch", func(b *testing.B) { benchStream(b, true) })
}

func benchStream(b *testing.B, batch bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go Serve(ctx, ln, streamer{elem: make([]byte, 64), batch: batch})
	c, err := Dial(ctx, "tcp://"+ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	s, err := c.RequestStream(ctx, Payload{Data: []byte(strconv.Itoa(b.N))}, 256)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for range b.N {
		if _, err := s.Next(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "payloads/s")
}

// BenchmarkIdleConn: memory (heap and stacks) held per idle connection,
// client and server end together, over 200 connections that each did one
// request.
func BenchmarkIdleConn(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go Serve(ctx, ln, newEcho())
	url := "tcp://" + ln.Addr().String()
	mem := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse + ms.StackInuse
	}
	const n = 200
	p := Payload{Data: make([]byte, 64)}
	var per float64
	for range b.N {
		before := mem()
		conns := make([]*Conn, 0, n)
		for range n {
			c, err := Dial(ctx, url)
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
			if _, err := c.RequestResponse(ctx, p); err != nil {
				b.Fatal(err)
			}
		}
		per = (float64(mem()) - float64(before)) / n
		for _, c := range conns {
			c.Close()
		}
	}
	b.ReportMetric(per, "bytes/conn")
}

// BenchmarkRequestResponseLarge: request-responses of 1 MiB over one
// loopback TCP connection, 4 in flight: large frames, whose read buffers
// are pooled (readbudget.go) instead of allocated per frame.
func BenchmarkRequestResponseLarge(b *testing.B) {
	c, _ := pair(b, "tcp")
	ctx := context.Background()
	p := Payload{Data: make([]byte, 1<<20)}
	var next atomic.Int64
	b.SetBytes(2 << 20) // there and back
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := c.RequestResponse(ctx, p); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
