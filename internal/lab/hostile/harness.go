package hostile

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Counts is what a run of misbehaving connections saw, whatever the
// protocol: RunConns fills it.
type Counts struct {
	Opened int // connections that got through the dial (and any handshake)
	Failed int // connections that did not; FirstErr says why
	// Closed is how many the server closed before the run's duration
	// ended; ClosedAfter is when the last of those saw it, from its dial.
	Closed      int
	ClosedAfter time.Duration
	FirstErr    error
}

// Summary is a run's counts in the words of the hostile commands'
// one-line reports, which the scripts read ("N closed by the server"):
// "N connections, F failed, C closed by the server (the last after D)".
func (c Counts) Summary() string {
	closed := "none closed by the server"
	if c.Closed > 0 {
		closed = fmt.Sprintf("%d closed by the server (the last after %v)", c.Closed, c.ClosedAfter.Round(time.Millisecond))
	}
	return fmt.Sprintf("%d connections, %d failed, %s", c.Opened, c.Failed, closed)
}

// Names are xs as strings (modes, for flags' help and errors).
func Names[T ~string](xs []T) []string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = string(x)
	}
	return s
}

// RunConns dials conns connections at once with dial and misbehaves on
// each with act, under a context that ends after d (or with ctx). act
// reports whether the server closed the connection (rather than the
// context ending); it closes what dial opened.
func RunConns[C any](ctx context.Context, conns int, d time.Duration,
	dial func(context.Context) (C, error), act func(context.Context, C) (closed bool)) Counts {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
		c  Counts
	)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			start := time.Now()
			conn, err := dial(cctx)
			if err != nil {
				mu.Lock()
				c.Failed++
				if c.FirstErr == nil {
					c.FirstErr = err
				}
				mu.Unlock()
				return
			}
			mu.Lock()
			c.Opened++
			mu.Unlock()
			if act(cctx, conn) {
				mu.Lock()
				c.Closed++
				c.ClosedAfter = max(c.ClosedAfter, time.Since(start))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return c
}

// HeapPeak samples the heap in use every 10 ms until stop; stop returns
// the largest growth over the heap at the start (after a GC). For tests
// that run the server in their own process.
func HeapPeak() (stop func() int64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := int64(ms.HeapInuse)
	var peak atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak.Store(max(peak.Load(), int64(ms.HeapInuse)-base))
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// HeapInuse is the heap in use after a GC.
func HeapInuse() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// Good runs ask, one call at a time with 10 ms between (a trickle, not a
// load), until stop is called, ask fails, or 10000 calls; each call gets
// a context bounded to 10 s. stop returns how many were answered and the
// first failure: the well-behaved client of a hostile-client test.
func Good(ask func(context.Context) error) (stop func() (int, error)) {
	var (
		done     atomic.Bool
		answered int
		first    error
		wg       sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 10000 && !done.Load(); i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := ask(ctx)
			cancel()
			if err != nil {
				first = err
				return
			}
			answered++
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return func() (int, error) {
		done.Store(true)
		wg.Wait()
		return answered, first
	}
}

// Hold keeps a misbehaving connection, which reads nothing, until ctx
// ends: closing it would free at once what the server holds for it.
// Without reading, only a failed write tells that the server closed it,
// so probe writes something the server takes without answering, every
// 100 ms. It returns nil when ctx ends, else probe's error.
func Hold(ctx context.Context, probe func() error) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := probe(); err != nil {
			return err
		}
	}
}

// ClosingServer is for the harnesses' own tests (that a mode keeps its
// connection until the server closes it): a loopback listener on which
// read reads each connection, reporting whether the client closed its
// side first, after which the connection is closed. clientFirst waits
// for n connections to end and says how many the client closed first;
// stop closes the listener. Up to 64 ended connections wait to be
// counted; a test of more calls clientFirst as it goes.
func ClosingServer(read func(net.Conn) (clientFirst bool)) (addr string, clientFirst func(n int) int, stop func(), err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	ended := make(chan bool, 64)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				ended <- read(c)
			}()
		}
	}()
	clientFirst = func(n int) (first int) {
		for range n {
			if <-ended {
				first++
			}
		}
		return first
	}
	return lis.Addr().String(), clientFirst, func() { lis.Close() }, nil
}
