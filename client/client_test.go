package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/auth"
)

// wait bounds every blocking step: generous, so a loaded machine slows a
// test down instead of failing it.
const wait = 60 * time.Second

func newSink(t *testing.T) *testSink {
	t.Helper()
	ts := startSink(t.TempDir(), "127.0.0.1:0")
	t.Cleanup(ts.stop)
	return ts
}

func newProducer(t *testing.T, opts ...client.ProducerOpt) *client.Producer {
	t.Helper()
	p, err := client.NewProducer(append([]client.ProducerOpt{client.Logger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func newConsumer(t *testing.T, opts ...client.ConsumerOpt) *client.Consumer {
	t.Helper()
	c, err := client.NewConsumer(append([]client.ConsumerOpt{client.Logger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readAll reads until io.EOF.
func readAll(t *testing.T, c *client.Consumer) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var got []string
	for r, err := range c.Records(ctx) {
		if err != nil {
			t.Fatalf("after %d records: %v", len(got), err)
		}
		got = append(got, string(r.Value))
	}
	return got
}

// sameMultiset fails unless got holds each of want exactly once.
func sameMultiset(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Fatalf("%s: %d records, want %d (first got %q)", what, len(got), len(want), got[:min(len(got), 3)])
	}
}

func records(tag string, n int) ([][]byte, []string) {
	var bs [][]byte
	var ss []string
	for i := range n {
		s := fmt.Sprintf("%s-%06d", tag, i)
		bs = append(bs, []byte(s))
		ss = append(ss, s)
	}
	return bs, ss
}

// TestProduceFlushConsumeExactlyOnce: records produced from several
// goroutines are all in the sink once Flush returns, and a Consumer reads
// each exactly once, then io.EOF.
func TestProduceFlushConsumeExactlyOnce(t *testing.T) {
	s := newSink(t)
	p := newProducer(t, client.SinkAddrs(s.addr), client.SpoolDir(t.TempDir()), client.MaxMessageBytes(4096))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var want []string
	var wg sync.WaitGroup
	var mu sync.Mutex
	for g := range 4 {
		recs, ss := records(fmt.Sprintf("g%d", g), 2500)
		want = append(want, ss...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < len(recs); i += 100 {
				if err := p.Produce(ctx, recs[i:i+100]...); err != nil {
					mu.Lock()
					t.Error(err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.ProducedRecords != 10000 || st.AckedRecords != 10000 {
		t.Fatalf("stats after Flush: %+v", st)
	}
	c := newConsumer(t, client.SinkAddrs(s.addr))
	sameMultiset(t, "consumer", readAll(t, c), want)
	if st := c.Stats(); st.Records != 10000 || st.Messages < 10 {
		t.Fatalf("consumer stats: %+v", st)
	}
	// Caught up: another call says so again instead of blocking.
	if _, err := c.Next(ctx); err != io.EOF {
		t.Fatalf("Next at the end: %v, want io.EOF", err)
	}
}

// TestProduceIdempotentRetryIsDuplicate: a retry with the same producer
// id and sequence is a duplicate, also from a new Producer on the same
// spool (a restarted process), and the sink holds the records once.
func TestProduceIdempotentRetryIsDuplicate(t *testing.T) {
	s := newSink(t)
	spool := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	p, err := client.NewProducer(client.SinkAddrs(s.addr), client.SpoolDir(spool), client.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	for i, wantDup := range []bool{false, true} {
		dup, err := p.ProduceIdempotent(ctx, "p1", 1, []byte("one"), []byte("two"))
		if err != nil || dup != wantDup {
			t.Fatalf("attempt %d: duplicate=%v err=%v, want duplicate=%v", i, dup, err, wantDup)
		}
	}
	if _, err := p.ProduceIdempotent(ctx, "p1", 0, []byte("x")); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("seq 0: %v, want ErrBadRequest", err)
	}
	p.Close()
	if err := p.Produce(ctx, []byte("late")); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Produce after Close: %v, want ErrClosed", err)
	}
	p2 := newProducer(t, client.SinkAddrs(s.addr), client.SpoolDir(spool))
	if dup, err := p2.ProduceIdempotent(ctx, "p1", 1, []byte("one"), []byte("two")); err != nil || !dup {
		t.Fatalf("retry after restart: duplicate=%v err=%v, want a duplicate", dup, err)
	}
	if dup, err := p2.ProduceIdempotent(ctx, "p1", 2, []byte("three")); err != nil || dup {
		t.Fatalf("next seq: duplicate=%v err=%v", dup, err)
	}
	if err := p2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sameMultiset(t, "store", readAll(t, newConsumer(t, client.SinkAddrs(s.addr))), []string{"one", "two", "three"})
}

// produceMessages produces n single-record messages (a Produce call
// returns once its message is spooled, so the next starts another) and
// waits until the sink has them.
func produceMessages(t *testing.T, p *client.Producer, tag string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	recs, ss := records(tag, n)
	for _, r := range recs {
		if err := p.Produce(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return ss
}

// TestConsumerResumesByGroup: a group's second consumer starts after what
// the first committed (Commit, and CommitAsync confirmed by Close), and
// the group's records are read exactly once overall.
func TestConsumerResumesByGroup(t *testing.T) {
	s := newSink(t)
	p := newProducer(t, client.SinkAddrs(s.addr), client.SpoolDir(t.TempDir()))
	want := produceMessages(t, p, "m", 30)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var got []string
	read := func(n int, commit func(*client.Consumer) error) {
		c, err := client.NewConsumer(client.SinkAddrs(s.addr), client.Group("g"), client.Credits(4))
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			b, err := c.NextBatch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range b.Records {
				got = append(got, string(r))
			}
		}
		if err := commit(c); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	read(10, func(c *client.Consumer) error { return c.Commit(ctx) })
	read(10, func(c *client.Consumer) error { return c.CommitAsync() }) // Close confirms it
	c := newConsumer(t, client.SinkAddrs(s.addr), client.Group("g"))
	got = append(got, readAll(t, c)...)
	if !slices.Equal(got, want) {
		t.Fatalf("group read %d records %q…, want %d in order", len(got), got[:min(len(got), 12)], len(want))
	}
	// A consumer without a group cannot commit.
	if err := newConsumer(t, client.SinkAddrs(s.addr)).Commit(ctx); !errors.Is(err, client.ErrNoGroup) {
		t.Fatalf("Commit without a group: %v", err)
	}
}

// TestConsumerCommitKeepsReading: Commit ends the stream to learn the
// commit is applied; reading goes on where it stood, nothing repeated or
// skipped.
func TestConsumerCommitKeepsReading(t *testing.T) {
	s := newSink(t)
	p := newProducer(t, client.SinkAddrs(s.addr), client.SpoolDir(t.TempDir()))
	want := produceMessages(t, p, "k", 40)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c := newConsumer(t, client.SinkAddrs(s.addr), client.Group("g2"), client.Credits(8))
	var got []string
	for {
		r, err := c.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(r.Value))
		if len(got)%7 == 0 {
			if err := c.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read %d records, want %d in order", len(got), len(want))
	}
}

// TestResumeAfterExactlyOnce: a reader that keeps its own position
// resumes right after the last record it processed, even in the middle of
// a message.
func TestResumeAfterExactlyOnce(t *testing.T) {
	s := newSink(t)
	p := newProducer(t, client.SinkAddrs(s.addr), client.SpoolDir(t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	recs, want := records("r", 50)
	for i := 0; i < 50; i += 10 {
		if err := p.Produce(ctx, recs[i:i+10]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	var last client.Record
	opts := []client.ConsumerOpt{client.SinkAddrs(s.addr)}
	for len(got) < len(want) {
		c := newConsumer(t, opts...)
		for range 7 { // 7 does not divide the messages' 10 records
			r, err := c.Next(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got, last = append(got, string(r.Value)), r
		}
		c.Close()
		opts = []client.ConsumerOpt{client.SinkAddrs(s.addr), client.ResumeAfter(last)}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// TestConsumerFollowReconnects: a following consumer outlives its sink's
// restart, reports the reconnection and returns every record once.
func TestConsumerFollowReconnects(t *testing.T) {
	dir := t.TempDir()
	s := startSink(dir, "127.0.0.1:0")
	addr := s.addr
	defer func() { s.stop() }()
	p := newProducer(t, client.SinkAddrs(addr), client.SpoolDir(t.TempDir()))
	want := produceMessages(t, p, "before", 20)
	var reconnects atomic.Int32
	c := newConsumer(t, client.SinkAddrs(addr), client.Follow(true), client.Credits(4),
		client.OnReconnect(func(client.Reconnect) { reconnects.Add(1) }))
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	var got []string
	next := func() {
		t.Helper()
		r, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("after %d records: %v", len(got), err)
		}
		got = append(got, string(r.Value))
	}
	for range 10 {
		next()
	}
	s.stop()
	s = startSink(dir, addr)
	want = append(want, produceMessages(t, p, "after", 20)...)
	for len(got) < len(want) {
		next()
	}
	sameMultiset(t, "follow", got, want)
	if reconnects.Load() == 0 {
		t.Fatal("no reconnection reported")
	}
	// Nothing more: a short wait ends with the context's error, not a
	// record.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if r, err := c.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next past the end: %q, %v", r.Value, err)
	}
}

// TestHTTPProducer: records posted to an in-process agent's ingest API
// reach the sink once; a retried sequence is a duplicate; a token is
// sent; an unreachable agent is reported at once and given up on after
// RetryTimeout.
func TestHTTPProducer(t *testing.T) {
	s := newSink(t)
	toks, err := auth.ParseTokens(strings.NewReader("sekrit-0123456789abcdef producer-1\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{SinkAddr: s.addr, SpoolDir: t.TempDir(), Logger: quiet, IngestTokens: toks})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	if _, err := client.NewHTTPProducer(srv.URL, client.Token("sekrit-0123456789abcdef")); err == nil {
		t.Fatal("a token over plain http was accepted")
	}
	p, err := client.NewHTTPProducer(strings.TrimPrefix(srv.URL, "http://"), client.Token("sekrit-0123456789abcdef"), client.AllowTokenWithoutTLS(), client.Gzip())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	recs, want := records("h", 1000)
	for i := 0; i < len(recs); i += 250 {
		if err := p.Produce(ctx, recs[i:i+250]...); err != nil {
			t.Fatal(err)
		}
	}
	for i, wantDup := range []bool{false, true} {
		dup, err := p.ProduceIdempotent(ctx, "mine", 7, []byte("seven"))
		if err != nil || dup != wantDup {
			t.Fatalf("attempt %d: duplicate=%v err=%v", i, dup, err)
		}
	}
	want = append(want, "seven")
	if err := p.Produce(ctx, []byte("a\nb")); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("record with a newline: %v", err)
	}
	bad, err := client.NewHTTPProducer(srv.URL, client.Token("wrong"), client.AllowTokenWithoutTLS())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.Produce(ctx, []byte("x")); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("wrong token: %v, want ErrUnauthorized", err)
	}
	c := newConsumer(t, client.SinkAddrs(s.addr))
	var got []string
	deadline := time.Now().Add(wait)
	for len(got) < len(want) && time.Now().Before(deadline) {
		got = append(got, readAll(t, c)...)
		time.Sleep(10 * time.Millisecond) // the agent delivers in the background
	}
	sameMultiset(t, "store", got, want)

	// Nothing listens: the first failure is reported at once, the call
	// fails after RetryTimeout naming the cause.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	var first atomic.Value
	q, err := client.NewHTTPProducer(dead, client.RetryTimeout(300*time.Millisecond),
		client.OnRetryStatus(func(st client.RetryStatus) {
			if st.First {
				first.Store(st.Cause)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	err = q.Produce(ctx, []byte("x"))
	if !errors.Is(err, client.ErrAgentUnavailable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("unreachable agent: %v", err)
	}
	if c, _ := first.Load().(string); !strings.Contains(c, "cannot reach it") {
		t.Fatalf("first failure reported as %q", c)
	}
}

// TestHTTPProducerRetryAfterLostAnswer: the agent spools a request but
// its answer is lost (the connection drops); the producer retries with
// the same sequence number and the records are in the sink once.
func TestHTTPProducerRetryAfterLostAnswer(t *testing.T) {
	s := newSink(t)
	a, err := agent.New(agent.Config{SinkAddr: s.addr, SpoolDir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var mu sync.Mutex
	var seqs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seqs = append(seqs, r.Header.Get("Sluice-Sequence"))
		first := len(seqs) == 1
		mu.Unlock()
		if first {
			// Spool it, then drop the connection instead of answering.
			a.Handler().ServeHTTP(httptest.NewRecorder(), r)
			panic(http.ErrAbortHandler)
		}
		a.Handler().ServeHTTP(w, r)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var statuses []client.RetryStatus
	p, err := client.NewHTTPProducer(srv.URL, client.OnRetryStatus(func(st client.RetryStatus) {
		mu.Lock()
		statuses = append(statuses, st)
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Produce(ctx, []byte("once"), []byte("only")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(seqs) != 2 || seqs[0] != "1" || seqs[1] != "1" {
		t.Fatalf("sequence numbers sent: %q, want the same one twice", seqs)
	}
	if len(statuses) < 2 || !statuses[0].First || statuses[len(statuses)-1].Failing {
		t.Fatalf("retry statuses: %+v, want a first failure and a recovery", statuses)
	}
	mu.Unlock()
	// Everything the agent spooled is acknowledged: the store is final.
	deadline := time.Now().Add(wait)
	for a.AckedWatermark() < a.SpoolNext() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	sameMultiset(t, "store", readAll(t, newConsumer(t, client.SinkAddrs(s.addr))), []string{"once", "only"})
}

// TestProducerDurableWithoutSink: records produced while no sink is
// reachable are spooled; closed and reopened, the spool delivers them to
// the sink once it starts, and Flush says when.
func TestProducerDurableWithoutSink(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	spool := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	p, err := client.NewProducer(client.SinkAddrs(addr), client.SpoolDir(spool), client.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	recs, want := records("offline", 500)
	if err := p.Produce(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	if err := p.Flush(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush with no sink: %v, want the context's deadline", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	s := startSink(t.TempDir(), addr)
	defer s.stop()
	p2 := newProducer(t, client.SinkAddrs(addr), client.SpoolDir(spool))
	if err := p2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sameMultiset(t, "store", readAll(t, newConsumer(t, client.SinkAddrs(addr))), want)
}

// TestConsumerBacksOffFailedDials: with nothing listening, every failed
// dial doubles the wait (jittered ±20 %) up to 5 s, and the consumer
// reports being back once a stream opens. Before issue 24 only a
// stream's end grew the back-off: the waits stayed at 80–120 ms.
func TestConsumerBacksOffFailedDials(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	var (
		mu      sync.Mutex
		waits   []time.Duration
		back    []string
		started = make(chan struct{})
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	var s *testSink
	c := newConsumer(t, client.SinkAddrs(addr), client.Follow(true),
		client.OnReconnect(func(ev client.Reconnect) {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, ev.Wait)
			if len(waits) == 6 {
				s = startSink(t.TempDir(), addr)
				close(started)
			}
		}),
		client.OnReconnected(func(a string, down time.Duration) {
			mu.Lock()
			back = append(back, a)
			mu.Unlock()
			cancel()
		}))
	if _, err := c.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next: %v, want the cancel of OnReconnected", err)
	}
	<-started
	defer s.stop()
	mu.Lock()
	defer mu.Unlock()
	for i, w := range waits {
		lo := time.Duration(float64(min(100*time.Millisecond<<i, client.ReconnectMax)) * 0.8)
		if w < lo {
			t.Errorf("wait %d: %v, want at least %v (waits %v)", i, w, lo, waits)
		}
	}
	if len(back) != 1 || back[0] != addr {
		t.Fatalf("OnReconnected calls %q, want one for %s", back, addr)
	}
}
