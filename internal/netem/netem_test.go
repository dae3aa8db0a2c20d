package netem

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// server is a test TCP server running handler on each connection.
type server struct {
	addr  string
	lis   net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	once  sync.Once
}

func startServer(tb testing.TB, handler func(net.Conn)) *server {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &server{addr: lis.Addr().String(), lis: lis, conns: make(map[net.Conn]struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				handler(c)
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
		}
	}()
	tb.Cleanup(s.stop)
	return s
}

func (s *server) stop() {
	s.once.Do(func() {
		s.lis.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
}

func echo(c net.Conn) { io.Copy(c, c) }

// sink counts the bytes it receives, in total and per connection.
type sink struct {
	*server
	total   atomic.Int64
	mu      sync.Mutex
	waitN   int64
	waitCh  chan struct{}
	reached time.Time
	lastAt  []time.Time // per connection: when its last byte came
}

func startSink(tb testing.TB) *sink {
	s := &sink{}
	s.server = startServer(tb, func(c net.Conn) {
		s.mu.Lock()
		idx := len(s.lastAt)
		s.lastAt = append(s.lastAt, time.Time{})
		s.mu.Unlock()
		buf := make([]byte, 256<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				now := time.Now()
				t := s.total.Add(int64(n))
				s.mu.Lock()
				s.lastAt[idx] = now
				if s.waitCh != nil && t >= s.waitN {
					s.reached = now
					close(s.waitCh)
					s.waitCh = nil
				}
				s.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	})
	return s
}

// expect arms the sink: the returned channel closes when the total reaches n.
func (s *sink) expect(n int64) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	if s.total.Load() >= n {
		s.reached = time.Now()
		close(ch)
		return ch
	}
	s.waitN, s.waitCh = n, ch
	return ch
}

func newLink(tb testing.TB, cfg Config) (*Link, string) {
	tb.Helper()
	l, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	addr, err := l.Listen("127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l, addr
}

func dialN(tb testing.TB, addr string, n int) []net.Conn {
	tb.Helper()
	cs := make([]net.Conn, n)
	for i := range cs {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			tb.Fatal(err)
		}
		cs[i] = c
		tb.Cleanup(func() { c.Close() })
	}
	return cs
}

// rateRun is the outcome of measureRate.
type rateRun struct {
	got    float64 // aggregate bytes/s seen by the server
	steady float64 // the same without the bucket's initial Burst
	spread float64 // how far apart the connections finished, as a fraction of the run
}

// measureRate sends total bytes spread over conns connections through a link
// of the given rate and measures what arrives at the server.
func measureRate(t *testing.T, rate, total int64, conns int) rateRun {
	t.Helper()
	s := startSink(t)
	l, addr := newLink(t, Config{Target: s.addr, Rate: rate})
	cs := dialN(t, addr, conns)
	done := s.expect(total)
	buf := make([]byte, 64<<10)
	start := time.Now()
	for i, c := range cs {
		go func() {
			n := total / int64(conns)
			if i == 0 {
				n += total % int64(conns)
			}
			for n > 0 {
				k, err := c.Write(buf[:min(n, int64(len(buf)))])
				if err != nil {
					t.Errorf("write: %v", err)
					return
				}
				n -= int64(k)
			}
		}()
	}
	select {
	case <-done:
	case <-time.After(time.Duration(3*float64(total)/float64(rate)*1e9) + 5*time.Second):
		t.Fatalf("timeout: %d of %d bytes arrived", s.total.Load(), total)
	}
	s.mu.Lock()
	elapsed := s.reached.Sub(start)
	first, last := s.lastAt[0], s.lastAt[0]
	for _, at := range s.lastAt {
		if at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	s.mu.Unlock()
	return rateRun{
		got:    float64(total) / elapsed.Seconds(),
		steady: float64(total-l.Config().Burst) / elapsed.Seconds(),
		spread: last.Sub(first).Seconds() / elapsed.Seconds(),
	}
}

func checkRate(t *testing.T, name string, r rateRun, want int64) {
	t.Helper()
	pct := func(x float64) float64 { return 100 * (x - float64(want)) / float64(want) }
	errPct := pct(r.got)
	t.Logf("%s: set %.2f MB/s (%.1f Mbit/s), measured %.3f MB/s, error %+.2f %% (%+.2f %% without the initial burst)",
		name, float64(want)/1e6, float64(want)*8/1e6, r.got/1e6, errPct, pct(r.steady))
	if math.Abs(errPct) > 3 {
		t.Errorf("%s: rate error %+.2f %%, want within 3 %%", name, errPct)
	}
}

func TestRate(t *testing.T) {
	t.Run("40Mbit-4conns", func(t *testing.T) {
		const rate = 5e6 // 40 Mbit/s
		r := measureRate(t, rate, 15e6, 4)
		checkRate(t, "4 connections", r, rate)
		t.Logf("4 connections finished within %.1f %% of the run of each other", 100*r.spread)
	})
	t.Run("64Mbit-1conn", func(t *testing.T) {
		const rate = 8e6
		checkRate(t, "1 connection", measureRate(t, rate, 12e6, 1), rate)
	})
}

// The bottleneck is shared: one connection and four get the same aggregate,
// and the four share it evenly.
func TestShared(t *testing.T) {
	const rate, total = 10e6, 8e6
	one := measureRate(t, rate, total, 1)
	four := measureRate(t, rate, total, 4)
	checkRate(t, "shared, 1 connection", one, rate)
	checkRate(t, "shared, 4 connections", four, rate)
	diff, spread := 100*(four.got-one.got)/one.got, four.spread
	t.Logf("4 vs 1 connection aggregate: %+.2f %%; the 4 finished within %.1f %% of the run", diff, 100*spread)
	if math.Abs(diff) > 3 {
		t.Errorf("4 connections got %+.2f %% of 1 connection's aggregate, want within 3 %%", diff)
	}
	if spread > 0.1 {
		t.Errorf("4 connections finished %.1f %% of the run apart; want < 10 %% (fair share)", 100*spread)
	}
}

// Each direction has its own Rate: an echo of N bytes takes N/Rate, not 2N/Rate.
func TestFullDuplex(t *testing.T) {
	const rate, n = 10e6, 4e6
	s := startServer(t, echo)
	l, addr := newLink(t, Config{Target: s.addr, Rate: rate})
	c := dialN(t, addr, 1)[0]
	start := time.Now()
	go func() {
		if _, err := c.Write(make([]byte, n)); err != nil {
			t.Errorf("write: %v", err)
		}
	}()
	if _, err := io.ReadFull(c, make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start).Seconds()
	want := float64(n) / rate
	t.Logf("echo of %.0f MB at %.0f MB/s each way: %.3f s (one direction's worth: %.3f s)", n/1e6, rate/1e6, elapsed, want)
	if elapsed < 0.95*want || elapsed > 1.3*want {
		t.Errorf("echo took %.3f s, want about %.3f s", elapsed, want)
	}
	if st := l.Stats(); st.BytesUp != n || st.BytesDown != n {
		t.Errorf("stats: up %d down %d, want %d each", st.BytesUp, st.BytesDown, int64(n))
	}
}

// pingPong measures request→response round trips of 32-byte messages,
// rounds sequential ones on each of conns concurrent connections. Connection
// i starts i×stagger late, so that the connections do not all ping at the
// same instant and queue behind each other for the CPU.
func pingPong(t *testing.T, addr string, conns, rounds int, stagger time.Duration) []time.Duration {
	t.Helper()
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	for i, c := range dialN(t, addr, conns) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * stagger)
			msg, buf := make([]byte, 32), make([]byte, 32)
			for r := range rounds {
				msg[0] = byte(r)
				t0 := time.Now()
				if _, err := c.Write(msg); err != nil {
					t.Error(err)
					return
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					t.Error(err)
					return
				}
				rtt := time.Since(t0)
				if buf[0] != byte(r) {
					t.Errorf("echo mismatch")
					return
				}
				mu.Lock()
				all = append(all, rtt)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(all)
	return all
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

func testDelay(t *testing.T, delay time.Duration) {
	t.Parallel()
	s := startServer(t, echo)
	base := quantile(pingPong(t, s.addr, 5, 20, 0), 0.5)
	_, addr := newLink(t, Config{Target: s.addr, Delay: delay})
	rtts := pingPong(t, addr, 10, 20, 2*delay/10) // 200 samples
	if t.Failed() {
		return
	}
	for i := range rtts {
		rtts[i] -= base
	}
	want := 2 * delay
	med, p90, p99 := quantile(rtts, 0.5), quantile(rtts, 0.9), quantile(rtts, 0.99)
	t.Logf("delay %v each way: added RTT over %d ping-pongs: min %s, median %s (error %+.3f ms), p90 %s, p99 %s, max %s; direct RTT median %s",
		delay, len(rtts), ms(rtts[0]), ms(med), float64(med-want)/1e6, ms(p90), ms(p99), ms(rtts[len(rtts)-1]), ms(base))
	if d := med - want; d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("median added RTT %s, want within 1 ms of %v", ms(med), want)
	}
	if rtts[0] < want-time.Millisecond {
		t.Errorf("min added RTT %s is below %v", ms(rtts[0]), want)
	}
	// Generous, and p90 rather than p99: on a busy machine the whole
	// process now and then waits tens of ms for a CPU.
	if p90 > want+5*time.Millisecond {
		t.Errorf("p90 added RTT %s, want < %v + 5 ms", ms(p90), want)
	}
}

func TestDelay20ms(t *testing.T) { testDelay(t, 20*time.Millisecond) }
func TestDelay75ms(t *testing.T) { testDelay(t, 75*time.Millisecond) }

// A small request competing with a bulk transfer waits only for the bulk
// chunk being sent, not behind the whole bottleneck queue.
func TestFairQueue(t *testing.T) {
	const rate = 2e6
	const delay = 10 * time.Millisecond
	s := startServer(t, func(c net.Conn) {
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 && n <= 32 { // echo small reads: the pings
				c.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	})
	l, addr := newLink(t, Config{Target: s.addr, Rate: rate, Delay: delay})
	idle := pingPong(t, addr, 1, 10, 0)
	if t.Failed() {
		return
	}
	t.Logf("ping RTT on the idle link: median %s", ms(quantile(idle, 0.5)))
	if med := quantile(idle, 0.5); med < 2*delay || med > 2*delay+2*time.Millisecond {
		t.Errorf("idle ping RTT %s, want %v + a little", ms(med), 2*delay)
	}
	bulk := dialN(t, addr, 1)[0]
	go func() {
		buf := make([]byte, 1<<20)
		for {
			if _, err := bulk.Write(buf); err != nil {
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond) // let the queue fill
	rtts := pingPong(t, addr, 1, 20, 0)
	if t.Failed() {
		return
	}
	chunkTx := time.Duration(float64(l.up.chunk) / rate * 1e9)
	queueTx := time.Duration(float64(l.Config().QueueBytes) / rate * 1e9)
	med := quantile(rtts, 0.5)
	t.Logf("ping RTT behind a bulk transfer: median %s, max %s (2×Delay %v, one %d-byte chunk %v, full queue %v)",
		ms(med), ms(rtts[len(rtts)-1]), 2*delay, l.up.chunk, chunkTx, queueTx)
	if med > 2*delay+chunkTx+3*time.Millisecond {
		t.Errorf("median ping RTT %s behind bulk; want < 2×Delay + 1 chunk + 3 ms", ms(med))
	}
}

// A full bottleneck stops the proxy from reading, so the sender's writes block.
func TestBackpressure(t *testing.T) {
	const rate = 1e6
	s := startSink(t)
	_, addr := newLink(t, Config{Target: s.addr, Rate: rate})
	c := dialN(t, addr, 1)[0]
	c.SetWriteDeadline(time.Now().Add(time.Second))
	n, err := c.Write(make([]byte, 64<<20))
	if err == nil {
		t.Fatal("64 MiB write through a 1 MB/s link finished in 1 s")
	}
	t.Logf("accepted in 1 s at %.0f MB/s: %.1f MB (the rest is socket buffers and the %d KiB queue)", rate/1e6, float64(n)/1e6, 256)
	if n > 24<<20 {
		t.Errorf("sender got %d bytes into a 1 MB/s link in 1 s: no backpressure", n)
	}
}

// Jitter spreads the delay but never reorders a connection's bytes.
func TestJitter(t *testing.T) {
	const delay, jitter = 10 * time.Millisecond, 8 * time.Millisecond
	s := startServer(t, echo)
	_, addr := newLink(t, Config{Target: s.addr, Delay: delay, Jitter: jitter, Seed: 1})

	// Order: many small writes, each its own chunk with its own jitter.
	c := dialN(t, addr, 1)[0]
	const writes, size = 400, 1000
	sent := make([]byte, writes*size)
	for i := range sent {
		sent[i] = byte(i * 7 / 3)
	}
	go func() {
		for i := range writes {
			if _, err := c.Write(sent[i*size : (i+1)*size]); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	got := make([]byte, len(sent))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent) {
		t.Fatal("bytes reordered or corrupted under jitter")
	}

	// Spread: small spaced requests see jitter both ways. An RTT is the
	// sum of two delays uniform in [Delay-Jitter, Delay+Jitter].
	rtts := pingPong(t, addr, 10, 10, 2*delay/10)
	lo, hi, med := rtts[0], rtts[len(rtts)-1], quantile(rtts, 0.5)
	p10, p90 := quantile(rtts, 0.1), quantile(rtts, 0.9)
	t.Logf("jitter ±%v on %v each way: RTT min %s p10 %s median %s p90 %s max %s",
		jitter, delay, ms(lo), ms(p10), ms(med), ms(p90), ms(hi))
	if lo < 2*(delay-jitter)-time.Millisecond {
		t.Errorf("min RTT %s, want >= %v", ms(lo), 2*(delay-jitter))
	}
	// Stalls of a busy machine only add, so bound the upper end by p90.
	if p90 > 2*(delay+jitter)+2*time.Millisecond {
		t.Errorf("p90 RTT %s, want <= %v", ms(p90), 2*(delay+jitter))
	}
	if p90-p10 < jitter {
		t.Errorf("RTT p10–p90 spread %s, want at least %v", ms(p90-p10), jitter)
	}
	if d := med - 2*delay; d < -3*time.Millisecond || d > 3*time.Millisecond {
		t.Errorf("median RTT %s, want about %v", ms(med), 2*delay)
	}
}

// End of stream passes in order after the data, as a half-close.
func TestHalfClose(t *testing.T) {
	s := startServer(t, func(c net.Conn) {
		data, err := io.ReadAll(c) // until the client's FIN
		if err != nil {
			return
		}
		c.Write(data)
	})
	l, addr := newLink(t, Config{Target: s.addr, Rate: 10e6, Delay: 5 * time.Millisecond})
	c := dialN(t, addr, 1)[0]
	msg := bytes.Repeat([]byte("sluice"), 50000)
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("got %d bytes back, want %d", len(got), len(msg))
	}
	deadline := time.Now().Add(2 * time.Second)
	for l.Stats().Active != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st := l.Stats(); st.Active != 0 || st.Accepted != 1 || st.Aborted != 0 {
		t.Errorf("stats after a clean close: %+v", st)
	}
}

func TestResetAll(t *testing.T) {
	srvErrs := make(chan error, 10)
	s := startServer(t, func(c net.Conn) {
		_, err := io.Copy(c, c)
		if err == nil {
			err = io.EOF
		}
		srvErrs <- err
	})
	l, addr := newLink(t, Config{Target: s.addr, Delay: 2 * time.Millisecond})
	cs := dialN(t, addr, 3)
	for _, c := range cs {
		if _, err := c.Write([]byte("hi")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.ResetAll(); n != 3 {
		t.Errorf("ResetAll reset %d connections, want 3", n)
	}
	for i, c := range cs {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		if err == nil || err == io.EOF || (errors.As(err, &ne) && ne.Timeout()) {
			t.Errorf("client %d after ResetAll: read error %v, want a reset", i, err)
		}
		if i == 0 {
			t.Logf("client sees: %v", err)
		}
	}
	for i := range 3 {
		select {
		case err := <-srvErrs:
			if err == io.EOF {
				t.Errorf("server %d saw a clean close, want a reset", i)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("server connections not reset")
		}
	}
	// The link still works.
	c := dialN(t, addr, 1)[0]
	if _, err := c.Write([]byte("again")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 5)); err != nil {
		t.Fatalf("new connection after ResetAll: %v", err)
	}
	st := l.Stats()
	t.Logf("stats: %+v", st)
	if st.Resets != 3 || st.Accepted != 4 || st.Active != 1 {
		t.Errorf("stats %+v, want 3 resets, 4 accepted, 1 active", st)
	}
}

// A reset from one side reaches the other, after the link's delay.
func TestResetPropagates(t *testing.T) {
	const delay = 20 * time.Millisecond
	srvErr := make(chan error, 1)
	got := make(chan time.Time, 1)
	s := startServer(t, func(c net.Conn) {
		buf := make([]byte, 16)
		_, err := c.Read(buf) // the first message
		got <- time.Now()
		if err == nil {
			_, err = c.Read(buf)
		}
		srvErr <- err
	})
	l, addr := newLink(t, Config{Target: s.addr, Delay: delay})
	c := dialN(t, addr, 1)[0].(*net.TCPConn)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	<-got
	c.SetLinger(0)
	start := time.Now()
	c.Close()
	select {
	case err := <-srvErr:
		took := time.Since(start)
		t.Logf("server saw %v after %v", err, took)
		if err == nil || err == io.EOF {
			t.Errorf("server read error %v, want a reset", err)
		}
		if took < delay-time.Millisecond {
			t.Errorf("reset arrived after %v, before the link delay %v", took, delay)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("server never saw the reset")
	}
	deadline := time.Now().Add(time.Second)
	for l.Stats().Aborted != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if st := l.Stats(); st.Aborted != 1 || st.Active != 0 {
		t.Errorf("stats %+v, want 1 aborted, 0 active", st)
	}
}

func TestDialError(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	l, addr := newLink(t, Config{Target: dead})
	// The client may see the reset already in connect, or on its first read.
	if c, err := net.Dial("tcp", addr); err == nil {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Read(make([]byte, 1))
		c.Close()
		var ne net.Error
		if err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("read through a link to nowhere: %v, want a reset", err)
		}
	}
	deadline := time.Now().Add(time.Second)
	for l.Stats().DialErrors != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if st := l.Stats(); st.DialErrors != 1 {
		t.Errorf("stats %+v, want 1 dial error", st)
	}
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Target: "nohost"},
		{Target: "127.0.0.1:1", Rate: -1},
		{Target: "127.0.0.1:1", Delay: -1},
		{Target: "127.0.0.1:1", Jitter: -1},
		{Target: "127.0.0.1:1", Burst: -1},
		{Target: "127.0.0.1:1", QueueBytes: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	l, err := New(Config{Target: "127.0.0.1:1", Rate: 125e6})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if c := l.Config(); c.Burst != 125e3 || c.QueueBytes != 12.5e6 {
		t.Errorf("defaults at 1 Gbit/s: Burst %d QueueBytes %d", c.Burst, c.QueueBytes)
	}
}

// Close ends every goroutine, even with data queued, connections idle,
// senders blocked on a full bottleneck and chunks in the delay line.
func TestCloseNoLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		s := startServer(t, echo)
		l, err := New(Config{Target: s.addr, Rate: 1e6, Delay: 30 * time.Millisecond, Jitter: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		addr, err := l.Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var cs []net.Conn
		for i := range 6 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
			if i%2 == 0 { // busy: blocked on the bottleneck
				go func() {
					buf := make([]byte, 1<<20)
					for {
						if _, err := c.Write(buf); err != nil {
							return
						}
					}
				}()
				go io.Copy(io.Discard, c)
			}
		}
		time.Sleep(200 * time.Millisecond)
		if st := l.Stats(); st.Active != 6 {
			t.Errorf("active %d, want 6", st.Active)
		}
		start := time.Now()
		l.Close()
		t.Logf("Close took %v", time.Since(start))
		if _, err := l.Listen("127.0.0.1:0"); !errors.Is(err, ErrClosed) {
			t.Errorf("Listen after Close: %v", err)
		}
		for _, c := range cs {
			c.Close()
		}
		s.stop()
	}()
	deadline := time.Now().Add(3 * time.Second)
	n := runtime.NumGoroutine()
	for n > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	if n > before {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("%d goroutines before, %d after Close:\n%s", before, n, buf)
	}
}

// BenchmarkThroughput pushes data one way through an unlimited link (and, for
// reference, straight to the server, and through a 1 Gbit/s link).
// cpu-s/GB is the CPU time of the whole process (sender, proxy and receiver)
// per GB moved.
func BenchmarkThroughput(b *testing.B) {
	for _, bc := range []struct {
		name  string
		conns int
		cfg   *Config
	}{
		{"direct/conns=1", 1, nil},
		{"link/conns=1", 1, &Config{}},
		{"link/conns=4", 4, &Config{}},
		{"link-delay5ms/conns=4", 4, &Config{Delay: 5 * time.Millisecond}},
		{"link-1Gbit/conns=4", 4, &Config{Rate: 125e6}},
		{"link-4Gbit/conns=4", 4, &Config{Rate: 500e6}},
	} {
		b.Run(bc.name, func(b *testing.B) { benchThroughput(b, bc.conns, bc.cfg) })
	}
}

func benchThroughput(b *testing.B, conns int, cfg *Config) {
	s := startSink(b)
	addr := s.addr
	if cfg != nil {
		c := *cfg
		c.Target = s.addr
		_, addr = newLink(b, c)
	}
	cs := dialN(b, addr, conns)
	const size = 64 << 10
	buf := make([]byte, size)
	b.SetBytes(size)
	total := int64(b.N) * size
	done := s.expect(total)
	cpu0 := processCPU()
	b.ResetTimer()
	for i, c := range cs {
		go func() {
			n := b.N / conns
			if i < b.N%conns {
				n++
			}
			for range n {
				if _, err := c.Write(buf); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		b.Fatalf("timeout: %d of %d bytes", s.total.Load(), total)
	}
	b.StopTimer()
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(cpu.Seconds()/(float64(total)/1e9), "cpu-s/GB")
	}
}
