//go:build unix

package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
)

// needFiles skips the test when the soft limit of open files is below n.
// Go (1.19+) raises the soft limit to the hard one when a program starts,
// so what is read here is the hard limit unless something lowered it.
func needFiles(t *testing.T, n uint64) {
	t.Helper()
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Skipf("cannot read RLIMIT_NOFILE: %v", err)
	}
	if r.Cur < n {
		t.Skipf("this test needs %d open files (both ends of its connections are in this process); "+
			"RLIMIT_NOFILE is %d (hard %d): raise it (ulimit -n) to run it", n, r.Cur, r.Max)
	}
}

// sessionCounts is what the sink serves now: Send sessions listed, agents
// with a live session, and sessions of any kind entered (tests).
func (s *Sink) sessionCounts() (streams, live, entered int) {
	s.statusMu.Lock()
	streams, live = len(s.sendStreams), len(s.live)
	s.statusMu.Unlock()
	s.sessMu.Lock()
	entered = len(s.conns)
	s.sessMu.Unlock()
	return
}

// fleetAgent is a light agent: its own connection (own TCP connection
// from 127.0.0.1) and one Send stream, driven by the test's goroutines
// (no t.Fatal: errors are returned).
type fleetAgent struct {
	cc     *grpc.ClientConn
	stream grpc.BidiStreamingClient[sluicev1.Request, sluicev1.Response]
	cancel context.CancelFunc
	// resps, when set, has what a goroutine of the test receives.
	resps chan *sluicev1.Response
}

// dialFleetAgent connects as agent and waits for the Welcome.
func dialFleetAgent(addr, agent string) (*fleetAgent, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		// Small buffers: a thousand of these live in one test process.
		grpc.WithReadBufferSize(4<<10), grpc.WithWriteBufferSize(4<<10))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	a := &fleetAgent{cc: cc, cancel: cancel}
	a.stream, err = sluicev1.NewSinkClient(cc).Send(ctx)
	if err == nil {
		err = a.stream.Send(sinkclient.Hello(agent))
		if err == io.EOF {
			_, err = a.stream.Recv()
		}
	}
	if err == nil {
		var r *sluicev1.Response
		if r, err = a.stream.Recv(); err == nil && r.GetWelcome() == nil {
			err = fmt.Errorf("first response %v is not a Welcome", r)
		}
	}
	if err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

// deliver sends message id and reads until it is acked.
func (a *fleetAgent) deliver(id uint64) error {
	if err := a.stream.Send(sinkclient.PlainRequest(id, "record of message "+itoa(id))); err != nil && err != io.EOF {
		return err
	}
	for {
		var r *sluicev1.Response
		var err error
		if a.resps != nil {
			var ok bool
			select {
			case r, ok = <-a.resps:
			case <-time.After(wait):
				return errors.New("no ack")
			}
			if !ok {
				return errors.New("stream ended")
			}
		} else if r, err = a.stream.Recv(); err != nil {
			return err
		}
		for _, rg := range r.GetAck().GetRanges() {
			if rg.First <= id && id <= rg.Last {
				return nil
			}
		}
	}
}

func (a *fleetAgent) close() {
	a.cancel()
	a.cc.Close()
}

// TestFleetBehindOneAddress (issue 23): 1,000 agents with distinct ids,
// all connecting from 127.0.0.1 (a fleet behind one NAT gateway, or a
// sink behind a load balancer that rewrites source addresses), each on
// its own connection, with the default limits: every one is served and
// gets a message acked, and all 1,000 sessions are live at once.
// MaxConnsPerPeer (64) bounds only connections that have not passed a
// Hello; before issue 23 it counted every connection and the 65th agent
// was closed at accept (Unavailable), forever.
func TestFleetBehindOneAddress(t *testing.T) {
	const agents, parallel = 1000, 32 // parallel: below MaxConnsPerPeer, connecting at once
	needFiles(t, 2*agents+256)
	h := newHarness(t, nil)
	if h.cfg.MaxConnsPerPeer != 0 {
		t.Fatal("the test is about the default limits")
	}
	addr := h.cc.Target()
	fleet := make([]*fleetAgent, agents)
	t.Cleanup(func() {
		for _, a := range fleet {
			if a != nil {
				a.close()
			}
		}
	})
	errs := make(chan error, agents)
	next := make(chan int, agents)
	for i := range agents {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				id := fmt.Sprintf("fleet-%04d", i)
				a, err := dialFleetAgent(addr, id)
				if err == nil {
					fleet[i] = a
					err = a.deliver(uint64(i) + 1)
				}
				if err != nil {
					errs <- fmt.Errorf("agent %s: %w", id, err)
				}
			}
		}()
	}
	wg.Wait()
	n := reportFirst(t, errs, 5)
	if n > 0 {
		t.Fatalf("%d of %d agents failed (refused: %v)", n, agents,
			metricValue(t, h, "sluice_sink_refused_total{reason=conns_per_peer}"))
	}
	if streams, live, _ := h.s.sessionCounts(); streams != agents || live != agents {
		t.Errorf("live Send sessions = %d (%d agents), want %d", streams, live, agents)
	}
	if got := metricValue(t, h, "sluice_sink_refused_total{reason=conns_per_peer}"); got != 0 {
		t.Errorf("refused_total{conns_per_peer} = %v, want 0", got)
	}
	if got := len(h.stored()); got != agents {
		t.Errorf("%d records stored, want %d", got, agents)
	}
	// The agents' connections have all proven an identity: none counts
	// against the per-address limit.
	if anon, _ := h.s.peers.counts("127.0.0.1"); anon > 1 { // the harness's own connection, unused
		t.Errorf("%d anonymous connections from 127.0.0.1, want at most 1", anon)
	}
}

// TestSameAgentReplaces (issue 23): 500 connections that all Hello as
// the same agent id leave one live session: each new Hello ends the
// agent's older session with Aborted ("replaced by a newer session"),
// whose connection then counts as anonymous again until closed. Messages
// sent on replaced sessions are safe: the surviving session resends all
// 500 and each is acked and stored exactly once. Before issue 23 every
// session stayed live (500 streams for one agent) and, held open, the
// 65th connection was refused.
func TestSameAgentReplaces(t *testing.T) {
	const conns, parallel = 500, 16
	needFiles(t, 2*conns+256)
	h := newHarness(t, nil)
	addr := h.cc.Target()
	var (
		mu      sync.Mutex
		all     []*fleetAgent
		ended   = make(chan error, conns)
		refused int
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range all {
			a.close()
		}
	})
	next := make(chan int, conns)
	for i := range conns {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	var failed error
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var a *fleetAgent
				var err error
				// A connection may be refused while replaced ones are
				// still open (they count until the test closes them).
				for try := 0; try < 100; try++ {
					if a, err = dialFleetAgent(addr, "twin"); status.Code(err) != codes.Unavailable {
						break
					}
					mu.Lock()
					refused++
					mu.Unlock()
				}
				if err != nil {
					mu.Lock()
					failed = fmt.Errorf("connection %d: %w", i, err)
					mu.Unlock()
					return
				}
				mu.Lock()
				all = append(all, a)
				mu.Unlock()
				// Its message may be acked or not before a newer session
				// replaces this one; then the connection goes, as an
				// agent's would.
				_ = a.stream.Send(sinkclient.PlainRequest(uint64(i)+1, "record of message "+itoa(uint64(i)+1)))
				a.resps = make(chan *sluicev1.Response, 4*conns)
				go func() {
					defer close(a.resps)
					for {
						r, err := a.stream.Recv()
						if err != nil {
							if status.Code(err) == codes.Aborted {
								a.cc.Close()
							}
							ended <- err
							return
						}
						a.resps <- r
					}
				}()
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		t.Fatalf("%v (retries after refusals: %d)", failed, refused)
	}
	timeout := time.After(wait)
	for range conns - 1 {
		select {
		case err := <-ended:
			if status.Code(err) != codes.Aborted || !containsAll(err.Error(), "replaced by a newer session", `"twin"`) {
				t.Fatalf("a replaced session ended with %v, want Aborted: replaced by a newer session of agent \"twin\"", err)
			}
		case <-timeout:
			t.Fatal("replaced sessions did not end")
		}
	}
	if streams, live, entered := h.s.sessionCounts(); streams != 1 || live != 1 || entered != 1 {
		t.Errorf("Send sessions listed %d, live agents %d, sessions entered %d; want 1 each", streams, live, entered)
	}
	if got := metricValue(t, h, "sluice_sink_streams_cut_total{reason=replaced}"); got != conns-1 {
		t.Errorf("streams_cut_total{replaced} = %v, want %d", got, conns-1)
	}
	if n := strings.Count(h.logs.String(), "replaced this one"); n != 1 {
		t.Errorf("%d Warn lines about a replaced session, want 1 (once a minute per agent)", n)
	}
	ags := h.s.Agents()
	if len(ags) != 1 || ags[0].Connected != 1 {
		t.Errorf("Agents() = %+v, want twin with 1 session", ags)
	}
	select {
	case err := <-ended:
		t.Fatalf("the live session ended too: %v", err)
	default:
	}
	// The live one (the only connection still open) resends everything.
	var live *fleetAgent
	mu.Lock()
	for _, a := range all {
		if a.cc.GetState().String() != "SHUTDOWN" {
			if live != nil {
				t.Fatal("two connections still open")
			}
			live = a
		}
	}
	mu.Unlock()
	if live == nil {
		t.Fatal("no connection left open")
	}
	for id := uint64(1); id <= conns; id++ {
		if err := live.deliver(id); err != nil {
			t.Fatalf("resend of %d on the live session: %v", id, err)
		}
	}
	got := h.stored()
	seen := make(map[string]bool, len(got))
	for _, k := range got {
		if seen[k] {
			t.Errorf("%s stored twice", k)
		}
		seen[k] = true
	}
	if len(seen) != conns {
		t.Errorf("%d distinct messages stored, want %d", len(seen), conns)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestFleetReconnectStorm (issue 23): 300 agents behind one address all
// (re)connecting at once, more than MaxConnsPerPeer (64) before their
// Hello: those over the limit are refused and retry, and every one is
// served, since a connection past its Hello frees its slot. Before issue
// 23 the first 64 kept their slots and the others were refused forever.
func TestFleetReconnectStorm(t *testing.T) {
	const agents, attempts = 300, 1000
	needFiles(t, 2*agents+256)
	h := newHarness(t, nil)
	addr := h.cc.Target()
	fleet := make([]*fleetAgent, agents)
	t.Cleanup(func() {
		for _, a := range fleet {
			if a != nil {
				a.close()
			}
		}
	})
	errs := make(chan error, agents)
	var wg sync.WaitGroup
	for i := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("storm-%03d", i)
			var err error
			for try := 0; try < attempts; try++ {
				var a *fleetAgent
				if a, err = dialFleetAgent(addr, id); err == nil {
					fleet[i] = a
					err = a.deliver(1)
					break
				}
				if status.Code(err) != codes.Unavailable {
					break
				}
			}
			if err != nil {
				errs <- fmt.Errorf("agent %s: %w", id, err)
			}
		}()
	}
	wg.Wait()
	n := reportFirst(t, errs, 5)
	if n > 0 {
		t.Fatalf("%d of %d agents not served within %d attempts each", n, agents, attempts)
	}
	if streams, live, _ := h.s.sessionCounts(); streams != agents || live != agents {
		t.Errorf("live Send sessions = %d (%d agents), want %d", streams, live, agents)
	}
	t.Logf("connections refused on the way: %v", metricValue(t, h, "sluice_sink_refused_total{reason=conns_per_peer}"))
}

// reportFirst closes errs, reports its first max errors and returns how
// many it held: a fleet's failures without a thousand lines of them.
func reportFirst(t *testing.T, errs chan error, max int) int {
	t.Helper()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= max {
			t.Error(err)
		}
	}
	return n
}
