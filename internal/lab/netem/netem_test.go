package netem

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// The tests below assert on the link's decisions as its tracer records
// them, on the link's own clock (virtual time: when a chunk is due, when the
// bucket releases it), and on the order of events; never on how long
// something took by the wall clock, which a loaded machine stretches. The
// measured figures (added RTT, achieved rate) are benchmarks:
//
//	go test -run XXX -bench 'Delay|Rate' ./internal/lab/netem/

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

// sink counts the bytes it receives.
type sink struct {
	*server
	total  atomic.Int64
	mu     sync.Mutex
	waitN  int64
	waitCh chan struct{}
}

func startSink(tb testing.TB) *sink {
	s := &sink{}
	s.server = startServer(tb, func(c net.Conn) {
		buf := make([]byte, 256<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				t := s.total.Add(int64(n))
				s.mu.Lock()
				if s.waitCh != nil && t >= s.waitN {
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
		close(ch)
		return ch
	}
	s.waitN, s.waitCh = n, ch
	return ch
}

// openLink starts a traced link in front of cfg.Target.
func openLink(tb testing.TB, cfg Config) (*Link, string, *tracer) {
	tb.Helper()
	tr := &tracer{}
	l, err := newLink(cfg, tr)
	if err != nil {
		tb.Fatal(err)
	}
	addr, err := l.Listen("127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l, addr, tr
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

// send writes total bytes spread over the connections and waits until the
// sink has them all.
func send(t *testing.T, s *sink, cs []net.Conn, total int64) {
	t.Helper()
	done := s.expect(total)
	buf := make([]byte, 64<<10)
	for i, c := range cs {
		go func() {
			n := total / int64(len(cs))
			if i == 0 {
				n += total % int64(len(cs))
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
	case <-time.After(5 * time.Minute):
		t.Fatalf("%d of %d bytes arrived", s.total.Load(), total)
	}
}

// checkBucket checks one direction's releases against the bottleneck's
// specification, on the link's clock:
//
//   - conformance: the releases fit a token bucket of depth Burst filled at
//     Rate that starts full, so no interval carries more than
//     Rate×interval + Burst bytes;
//   - work conservation: a chunk leaves no later than its own transmission
//     time after both its arrival and the release before it, so the link
//     never idles while something is queued.
//
// Together they pin the rate: exactly Rate while backlogged. It returns
// the bytes released and how many releases found the link busy.
func checkBucket(t *testing.T, name string, l *Link, d *direction, rels []traceEvent) (bytes int64, busy int) {
	t.Helper()
	if len(rels) == 0 {
		t.Fatalf("%s: no releases", name)
	}
	cfg := l.Config()
	var prev time.Duration
	for i, r := range rels {
		bytes += int64(r.n)
		start := r.at
		if i > 0 && prev > r.at {
			start = prev
			busy++
		}
		if late := r.ready - (start + d.txTime(int64(r.n))); late > 0 {
			t.Fatalf("%s: release %d of %d bytes at %v, %v after its arrival/the previous release plus its transmission time: the link idled",
				name, i, r.n, r.ready, late)
		}
		prev = r.ready
	}
	sorted := slices.Clone(rels)
	slices.SortStableFunc(sorted, func(a, b traceEvent) int { return int(a.ready - b.ready) })
	tokens, at := float64(cfg.Burst), sorted[0].ready
	for i, r := range sorted {
		tokens = min(float64(cfg.Burst), tokens+float64(cfg.Rate)*(r.ready-at).Seconds())
		at = r.ready
		tokens -= float64(r.n)
		if tokens < -1 { // a byte of rounding: transmission times are whole ns
			t.Fatalf("%s: release %d (%d bytes at %v) exceeds the token bucket by %.0f bytes", name, i, r.n, r.ready, -tokens)
		}
	}
	return bytes, busy
}

// checkRoundRobin checks the scheduler's order: between two turns of a
// flow, every flow that had a chunk queued at the first turn gets a turn.
func checkRoundRobin(t *testing.T, name string, pops []traceEvent) {
	t.Helper()
	last := map[uint64]int{} // flow -> index of its last pop
	for j, p := range pops {
		if i, ok := last[p.flow]; ok {
			served := map[uint64]bool{}
			for _, q := range pops[i+1 : j] {
				served[q.flow] = true
			}
			for _, b := range pops[i].backlog {
				if b != p.flow && !served[b] {
					t.Fatalf("%s: flow %d served twice (turns %d and %d) while flow %d waited with a chunk queued", name, p.flow, i, j, b)
				}
			}
		}
		last[p.flow] = j
	}
}

func TestRate(t *testing.T) {
	for _, c := range []struct {
		name  string
		rate  int64
		total int64
		conns int
	}{
		{"40Mbit-4conns", 5e6, 4e6, 4},
		{"64Mbit-1conn", 8e6, 4e6, 1},
		{"1Gbit-4conns", 125e6, 32e6, 4}, // 64 KiB chunks
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startSink(t)
			l, addr, tr := openLink(t, Config{Target: s.addr, Rate: c.rate})
			send(t, s, dialN(t, addr, c.conns), c.total)
			got, busy := checkBucket(t, c.name, l, l.up, tr.events(evRelease, true))
			if got != c.total {
				t.Errorf("released %d bytes, want %d", got, c.total)
			}
			if busy == 0 {
				t.Errorf("no release found the link busy: the senders never filled it")
			}
			checkRoundRobin(t, c.name, tr.events(evPop, true))
			// The link counts a chunk as delivered after its write to the
			// server returns, which can be after the server has read it:
			// wait for the counter rather than race it.
			testwait.For(t, "stats to count every byte", func() bool { return l.Stats().BytesUp >= c.total })
			if st := l.Stats(); st.BytesUp != c.total || st.BytesDown != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// The bottleneck is shared and fair: four connections pass the same
// conformance checks as one, and are served round-robin.
func TestShared(t *testing.T) {
	const rate, total = 10e6, 8e6
	s := startSink(t)
	l, addr, tr := openLink(t, Config{Target: s.addr, Rate: rate})
	send(t, s, dialN(t, addr, 4), total)
	checkBucket(t, "shared", l, l.up, tr.events(evRelease, true))
	pops := tr.events(evPop, true)
	checkRoundRobin(t, "shared", pops)
	contended := 0
	for _, p := range pops {
		if len(p.backlog) >= 2 {
			contended++
		}
	}
	if contended == 0 {
		t.Error("the four connections never had chunks queued at once: fairness untested")
	}
}

// Each direction has its own bucket: an echo passes each direction's
// checks on its own, and the replies flow while the requests still do.
func TestFullDuplex(t *testing.T) {
	const rate, n = 10e6, 4e6
	s := startServer(t, echo)
	l, addr, tr := openLink(t, Config{Target: s.addr, Rate: rate})
	c := dialN(t, addr, 1)[0]
	go func() {
		if _, err := c.Write(make([]byte, n)); err != nil {
			t.Errorf("write: %v", err)
		}
	}()
	if _, err := io.ReadFull(c, make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	upRels, downRels := tr.events(evRelease, true), tr.events(evRelease, false)
	checkBucket(t, "up", l, l.up, upRels)
	checkBucket(t, "down", l, l.down, downRels)
	if first, last := downRels[0].ready, upRels[len(upRels)-1].ready; first >= last {
		t.Errorf("the first reply left at %v, after the last request byte (%v): the directions took turns", first, last)
	}
	testwait.For(t, "stats to count every byte", func() bool { st := l.Stats(); return st.BytesUp >= n && st.BytesDown >= n })
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

// checkDelayLine checks one direction's delay line: every chunk is due
// exactly Delay after it left the bottleneck (or was read), and its
// writer did not write it before that, beyond the early margin the
// precise sleeper allows itself (half its wake-lag estimate).
func checkDelayLine(t *testing.T, name string, delay time.Duration, tr *tracer, up bool) int {
	t.Helper()
	dels := tr.events(evDeliver, up)
	for _, d := range dels {
		if d.due != d.ready+delay {
			t.Fatalf("%s: chunk ready at %v is due at %v, want %v later", name, d.ready, d.due, delay)
		}
	}
	for _, w := range tr.events(evWrite, up) {
		if w.wrote < w.due-maxWakeLag/2 {
			t.Fatalf("%s: chunk due at %v written at %v, early", name, w.due, w.wrote)
		}
	}
	return len(dels)
}

func TestDelay(t *testing.T) {
	for _, delay := range []time.Duration{20 * time.Millisecond, 75 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			t.Parallel()
			s := startServer(t, echo)
			_, addr, tr := openLink(t, Config{Target: s.addr, Delay: delay})
			pingPong(t, addr, 4, 5, 0)
			if t.Failed() {
				return
			}
			up := checkDelayLine(t, "up", delay, tr, true)
			down := checkDelayLine(t, "down", delay, tr, false)
			if up == 0 || down == 0 {
				t.Fatalf("%d chunks up, %d down: nothing crossed the link", up, down)
			}
		})
	}
}

// A small request competing with a bulk transfer waits only for the bulk
// chunk being sent, not behind the whole bottleneck queue: once queued,
// it is the next chunk the scheduler takes (fq_codel's sparse-flow rule).
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
	l, addr, tr := openLink(t, Config{Target: s.addr, Rate: rate, Delay: delay})
	bulk := dialN(t, addr, 1)[0]
	go func() {
		buf := make([]byte, 1<<20)
		for {
			if _, err := bulk.Write(buf); err != nil {
				return
			}
		}
	}()
	testwait.For(t, "a full bottleneck queue", func() bool {
		l.up.mu.Lock()
		defer l.up.mu.Unlock()
		return l.up.queued >= l.up.queueCap
	})
	pingPong(t, addr, 1, 20, 0)
	if t.Failed() {
		return
	}
	// In the up direction's event order: after a ping chunk is queued, at
	// most one other chunk may be taken before it (a bulk chunk that went
	// idle and rejoined the fresh flows just ahead of it).
	evs := tr.all(true)
	const pingFlow = 2 // pair ids count accepted connections: bulk is 1
	pings := 0
	for i, e := range evs {
		if e.ev != evQueue || e.flow != pingFlow {
			continue
		}
		pings++
		others := 0
		for _, f := range evs[i+1:] {
			if f.ev != evPop {
				continue
			}
			if f.flow == pingFlow {
				break
			}
			others++
		}
		if others > 1 {
			t.Fatalf("ping chunk %d waited behind %d bulk chunks, want at most 1", pings, others)
		}
	}
	if pings < 20 {
		t.Fatalf("%d ping chunks queued at the bottleneck, want 20", pings)
	}
	checkRoundRobin(t, "fair", tr.events(evPop, true))
	checkBucket(t, "fair", l, l.up, tr.events(evRelease, true))
}

// A full bottleneck stops the proxy from reading, so the sender's writes
// block: what the sender got accepted never runs ahead of what reached the
// server by more than the queue and the socket buffers, and the queue
// holds at most QueueBytes plus the one chunk a flow may always add.
func TestBackpressure(t *testing.T) {
	const rate = 1e6
	const slack = 24 << 20 // queue, in-flight cap and loopback socket buffers, generously
	s := startSink(t)
	l, addr, tr := openLink(t, Config{Target: s.addr, Rate: rate})
	c := dialN(t, addr, 1)[0]
	var accepted atomic.Int64
	go func() {
		buf := make([]byte, 64<<10)
		for range 1024 { // 64 MiB at most
			n, err := c.Write(buf)
			accepted.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	testwait.For(t, "a full bottleneck queue", func() bool {
		l.up.mu.Lock()
		defer l.up.mu.Unlock()
		return l.up.queued >= l.up.queueCap
	})
	// Read accepted before what arrived: the server's count only grows, so
	// the difference is never overstated.
	if ahead := accepted.Load() - l.Stats().BytesUp; ahead > slack {
		t.Errorf("the sender is %d bytes ahead of the server through a full %d-byte queue: no backpressure", ahead, l.Config().QueueBytes)
	}
	// The queue's occupancy from the trace: + on queueing, - on release
	// (recorded just before the bytes leave, so never overstated either).
	var q, peak int64
	for _, e := range tr.all(true) {
		switch e.ev {
		case evQueue:
			q += int64(e.n)
		case evRelease:
			q -= int64(e.n)
		}
		peak = max(peak, q)
	}
	if limit := l.Config().QueueBytes + int64(l.up.chunk); peak > limit {
		t.Errorf("the bottleneck held %d bytes, want at most QueueBytes + one chunk = %d", peak, limit)
	}
}

// Jitter spreads the delay but never reorders a connection's bytes.
func TestJitter(t *testing.T) {
	const delay, jitter = 10 * time.Millisecond, 8 * time.Millisecond
	s := startServer(t, echo)
	_, addr, tr := openLink(t, Config{Target: s.addr, Delay: delay, Jitter: jitter, Seed: 1})

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
			time.Sleep(200 * time.Microsecond) // pacing: separate chunks
		}
	}()
	got := make([]byte, len(sent))
	c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent) {
		t.Fatal("bytes reordered or corrupted under jitter")
	}

	// Spread: small spaced requests see jitter both ways.
	pingPong(t, addr, 10, 10, 2*delay/10)
	if t.Failed() {
		return
	}
	var delays []time.Duration
	for _, up := range []bool{true, false} {
		last := map[uint64]time.Duration{}
		for _, d := range tr.events(evDeliver, up) {
			x := d.due - d.ready
			if x < delay-jitter || x > delay+jitter {
				t.Fatalf("chunk delayed %v on the link's clock, want within %v ± %v", x, delay, jitter)
			}
			if d.due < last[d.flow] {
				t.Fatalf("flow %d: a chunk due at %v after one due at %v: reordered", d.flow, d.due, last[d.flow])
			}
			if d.due > last[d.flow] { // not clamped to keep the order
				delays = append(delays, x)
			}
			last[d.flow] = d.due
		}
	}
	slices.Sort(delays)
	p10, p90 := quantile(delays, 0.1), quantile(delays, 0.9)
	if len(delays) < 100 || p90-p10 < jitter {
		t.Errorf("%d unclamped delays, p10 %s p90 %s: want ≥ 100 spread over at least %v", len(delays), ms(p10), ms(p90), jitter)
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
	l, addr, _ := openLink(t, Config{Target: s.addr, Rate: 10e6, Delay: 5 * time.Millisecond})
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
	testwait.Until(func() bool { return l.Stats().Active == 0 })
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
	l, addr, _ := openLink(t, Config{Target: s.addr, Delay: 2 * time.Millisecond})
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

// A reset from one side reaches the other, after the link's delay: the
// reset travels the delay line like data.
func TestResetPropagates(t *testing.T) {
	const delay = 20 * time.Millisecond
	srvErr := make(chan error, 1)
	got := make(chan struct{}, 1)
	s := startServer(t, func(c net.Conn) {
		buf := make([]byte, 16)
		_, err := c.Read(buf) // the first message
		got <- struct{}{}
		if err == nil {
			_, err = c.Read(buf)
		}
		srvErr <- err
	})
	l, addr, tr := openLink(t, Config{Target: s.addr, Delay: delay})
	c := dialN(t, addr, 1)[0].(*net.TCPConn)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	<-got
	c.SetLinger(0)
	c.Close()
	select {
	case err := <-srvErr:
		if err == nil || err == io.EOF {
			t.Errorf("server read error %v, want a reset", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("server never saw the reset")
	}
	rst := 0
	for _, d := range tr.events(evDeliver, true) {
		if d.kind == kindRST {
			rst++
			if d.due != d.ready+delay {
				t.Errorf("reset read at %v due at %v, want %v later", d.ready, d.due, delay)
			}
		}
	}
	for _, w := range tr.events(evWrite, true) {
		if w.kind == kindRST && w.wrote < w.due-maxWakeLag/2 {
			t.Errorf("reset due at %v passed on at %v, before the link delay", w.due, w.wrote)
		}
	}
	if rst != 1 {
		t.Errorf("%d resets entered the delay line, want 1", rst)
	}
	testwait.For(t, "the pair to be counted aborted", func() bool { return l.Stats().Aborted == 1 })
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
	l, addr, _ := openLink(t, Config{Target: dead})
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
	testwait.Until(func() bool { return l.Stats().DialErrors == 1 })
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
		// Wait (not sleep and hope) until all six are proxied and the busy
		// ones have filled the bottleneck.
		testwait.For(t, "6 active connections and a full bottleneck", func() bool {
			l.up.mu.Lock()
			full := l.up.queued >= l.up.queueCap
			l.up.mu.Unlock()
			return l.Stats().Active == 6 && full
		})
		l.Close()
		if _, err := l.Listen("127.0.0.1:0"); !errors.Is(err, ErrClosed) {
			t.Errorf("Listen after Close: %v", err)
		}
		for _, c := range cs {
			c.Close()
		}
		s.stop()
	}()
	n := runtime.NumGoroutine()
	testwait.Until(func() bool { n = runtime.NumGoroutine(); return n <= before })
	if n > before {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("%d goroutines before, %d after Close:\n%s", before, n, buf)
	}
}

// BenchmarkDelay measures what the tests only check on the link's clock:
// the round-trip time a Delay link adds to 32-byte ping-pongs over
// loopback, by the wall clock. Reports the median and p99 added RTT (want
// 2×Delay) per run.
func BenchmarkDelay(b *testing.B) {
	for _, delay := range []time.Duration{time.Millisecond, 20 * time.Millisecond} {
		b.Run(delay.String(), func(b *testing.B) {
			s := startServer(b, echo)
			base := quantile(pingPongB(b, s.addr, 20), 0.5)
			_, addr, _ := openLink(b, Config{Target: s.addr, Delay: delay})
			b.ResetTimer()
			rtts := pingPongB(b, addr, b.N)
			b.StopTimer()
			for i := range rtts {
				rtts[i] -= base
			}
			slices.Sort(rtts)
			b.ReportMetric(float64(quantile(rtts, 0.5))/1e6, "added-rtt-p50-ms")
			b.ReportMetric(float64(quantile(rtts, 0.99))/1e6, "added-rtt-p99-ms")
			b.ReportMetric(float64(2*delay)/1e6, "want-ms")
		})
	}
}

// pingPongB runs n sequential 32-byte ping-pongs and returns their RTTs.
func pingPongB(b *testing.B, addr string, n int) []time.Duration {
	c := dialN(b, addr, 1)[0]
	msg, buf := make([]byte, 32), make([]byte, 32)
	rtts := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		rtts = append(rtts, time.Since(t0))
	}
	return rtts
}

// BenchmarkRate measures the rate a limited link delivers by the wall
// clock, 4 connections sharing it; reports MB/s and the error against the
// configured rate (the initial Burst excluded).
func BenchmarkRate(b *testing.B) {
	for _, rate := range []int64{5e6, 125e6} {
		b.Run(fmt.Sprintf("%gMbit", float64(rate)*8/1e6), func(b *testing.B) {
			s := startSink(b)
			l, addr, _ := openLink(b, Config{Target: s.addr, Rate: rate})
			cs := dialN(b, addr, 4)
			total := max(int64(b.N)*64<<10, rate/2)
			b.SetBytes(total / int64(b.N))
			done := s.expect(total)
			buf := make([]byte, 64<<10)
			b.ResetTimer()
			start := time.Now()
			for i, c := range cs {
				go func() {
					n := total / 4
					if i == 0 {
						n += total % 4
					}
					for n > 0 {
						k, err := c.Write(buf[:min(n, int64(len(buf)))])
						if err != nil {
							return
						}
						n -= int64(k)
					}
				}()
			}
			select {
			case <-done:
			case <-time.After(10 * time.Minute):
				b.Fatalf("%d of %d bytes", s.total.Load(), total)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			got := float64(total-l.Config().Burst) / elapsed.Seconds()
			b.ReportMetric(got/1e6, "MB/s")
			b.ReportMetric(100*(got-float64(rate))/float64(rate), "rate-error-%")
		})
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
		_, addr, _ = openLink(b, c)
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
