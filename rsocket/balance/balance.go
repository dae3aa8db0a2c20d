// Package balance is a client-side RSocket load balancer: one Client over
// several servers that offers the requester methods of a single
// *rsocket.Conn and chooses a server for each request.
//
// The choice is "predictive" in the sense of Finagle's and rsocket-java's
// balancers: each server has a cost, its peak-EWMA latency × (outstanding
// requests + 1), an estimate of how long a new request would wait there.
// Comparing every server each time would send every request to the one
// best server until its queue grew (herding); instead two servers are drawn
// at random and the cheaper one wins (power of two choices), which keeps
// the load near-balanced among equal servers and starves slow ones. The
// EWMA of an idle server fades with time (constant Config.Decay, 200 ms by default), so a
// server that was slow is tried again later and can show it recovered.
//
// Leases: a member whose connection reports LeaseAvailable() == false
// (see LeaseReporter; *rsocket.Conn implements it) is skipped, so no
// request waits for a LEASE while another server could take it.
//
// Failures: a server whose connection closes (or whose dial fails) is
// marked down and redialled after an exponential backoff with jitter
// (Config.BackoffBase doubling up to BackoffMax); a successful redial is
// the probe that brings it back, with a fresh latency history, so a
// restarted server gets traffic again within a backoff period.
//
// Retries: a request marked idempotent (WithIdempotent on the client, or
// Idempotent(ctx) per request) that fails because its connection died is
// sent again on another server, if the retry budget allows (10 % of
// requests plus 10 retries a second by default): a mass failure costs a
// bounded number of extra requests, never a retry storm. Application
// errors (an ERROR frame) are never retried. Streams and channels are
// retried only while opening; once elements flowed, a failure is the
// caller's.
package balance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"sync"
	"time"

	"github.com/sluicehq/sluice/rsocket"
)

// Requester is what both a single connection and a Client offer.
type Requester interface {
	RequestResponse(ctx context.Context, p rsocket.Payload) (rsocket.Payload, error)
	FireAndForget(ctx context.Context, p rsocket.Payload) error
	MetadataPush(ctx context.Context, metadata []byte) error
	RequestStream(ctx context.Context, p rsocket.Payload, n uint32) (*rsocket.Stream, error)
	RequestChannel(ctx context.Context, p rsocket.Payload, n uint32) (*rsocket.Channel, error)
	Close() error
}

var (
	_ Requester = (*rsocket.Conn)(nil)
	_ Requester = (*Client)(nil)
)

// LeaseReporter is implemented by connections that can tell whether the
// peer's lease allows a request now; the balancer skips those that cannot.
type LeaseReporter interface {
	LeaseAvailable() bool
}

// ErrNoServer: every server is down (or none may take the request).
var ErrNoServer = errors.New("balance: no server available")

// Policy chooses a server.
type Policy int

const (
	// Predictive is power of two choices over EWMA latency × (outstanding+1).
	Predictive Policy = iota
	// RoundRobin takes the servers in turn; the bench's baseline.
	RoundRobin
)

func (p Policy) String() string {
	if p == RoundRobin {
		return "round-robin"
	}
	return "predictive"
}

// Option configures a Client.
type Option func(*options)

type options struct {
	conn         []rsocket.Option
	cfg          Config
	policy       Policy
	idempotent   bool
	ratio, floor float64
	seed         int64
	log          *slog.Logger
	dialTimeout  time.Duration
}

// WithConnOptions are passed to every rsocket.Dial.
func WithConnOptions(o ...rsocket.Option) Option {
	return func(op *options) { op.conn = append(op.conn, o...) }
}

// WithConfig sets the EWMA decay and the backoff schedule.
func WithConfig(c Config) Option { return func(o *options) { o.cfg = c } }

// WithPolicy sets the choice policy (default Predictive).
func WithPolicy(p Policy) Option { return func(o *options) { o.policy = p } }

// WithIdempotent marks every request of the client as safe to send twice.
func WithIdempotent() Option { return func(o *options) { o.idempotent = true } }

// WithRetryBudget: retries may add ratio of the requests plus minPerSecond.
func WithRetryBudget(ratio, minPerSecond float64) Option {
	return func(o *options) { o.ratio, o.floor = ratio, minPerSecond }
}

// WithSeed seeds the random choices (default: from the clock).
func WithSeed(seed int64) Option { return func(o *options) { o.seed = seed } }

// WithLogger logs members going down and coming back (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

type idemKey struct{}

// Idempotent marks the requests made with ctx as safe to send twice.
func Idempotent(ctx context.Context) context.Context {
	return context.WithValue(ctx, idemKey{}, true)
}

// Client balances requests over several servers. Safe for concurrent use.
type Client struct {
	opts   options
	urls   []string
	origin time.Time
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	picker *Picker
	budget *Budget
	rng    *rand.Rand
	conns  []*rsocket.Conn // nil while down
	served []uint64        // requests sent per member, for Stats
}

// Dial connects to every URL (as rsocket.Dial does) and returns once at
// least one connection is up; the others are redialled in the background.
// It fails if urls is empty or no server could be reached.
func Dial(ctx context.Context, urls []string, opts ...Option) (*Client, error) {
	if len(urls) == 0 {
		return nil, errors.New("balance: no server URL")
	}
	o := options{cfg: DefaultConfig, ratio: 0.1, floor: 10, seed: time.Now().UnixNano(),
		log: slog.New(slog.DiscardHandler), dialTimeout: 5 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	cctx, cancel := context.WithCancel(context.Background())
	c := &Client{opts: o, urls: urls, origin: time.Now(), ctx: cctx, cancel: cancel,
		picker: NewPicker(len(urls), o.cfg), budget: NewBudget(o.ratio, o.floor, 100+o.floor),
		rng: rand.New(rand.NewSource(o.seed)), conns: make([]*rsocket.Conn, len(urls)), served: make([]uint64, len(urls))}
	errs := make([]error, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dctx, dcancel := context.WithTimeout(ctx, o.dialTimeout)
			defer dcancel()
			c.conns[i], errs[i] = rsocket.Dial(dctx, u, o.conn...)
		}()
	}
	wg.Wait()
	up := 0
	for i := range urls {
		if c.conns[i] != nil {
			up++
		}
	}
	if up == 0 {
		cancel()
		return nil, fmt.Errorf("balance: no server reachable: %w", errors.Join(errs...))
	}
	for i := range urls {
		c.wg.Add(1)
		go c.keep(i, c.conns[i])
	}
	return c, nil
}

func (c *Client) now() time.Duration { return time.Since(c.origin) }

// keep watches member i's connection and redials it with backoff when it
// ends, until the client closes.
func (c *Client) keep(i int, cn *rsocket.Conn) {
	defer c.wg.Done()
	for {
		if cn != nil {
			select {
			case <-cn.Done():
			case <-c.ctx.Done():
				return
			}
		}
		c.mu.Lock()
		if c.conns[i] == cn {
			c.conns[i] = nil
		}
		wait := c.picker.Failed(i, c.rng)
		c.mu.Unlock()
		c.opts.log.Info("rsocket balance: server down", "url", c.urls[i], "redial_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return
		}
		dctx, dcancel := context.WithTimeout(c.ctx, c.opts.dialTimeout)
		next, err := rsocket.Dial(dctx, c.urls[i], c.opts.conn...)
		dcancel()
		cn = nil
		if err != nil {
			continue
		}
		c.mu.Lock()
		if c.ctx.Err() != nil {
			c.mu.Unlock()
			next.Close()
			return
		}
		c.conns[i] = next
		c.picker.Up(i)
		c.mu.Unlock()
		c.opts.log.Info("rsocket balance: server up", "url", c.urls[i])
		cn = next
	}
}

// markDown is called when a request saw member i's connection fail, so
// that no other request picks it before keep notices.
func (c *Client) markDown(i int, cn *rsocket.Conn) {
	c.mu.Lock()
	if c.conns[i] == cn {
		c.conns[i] = nil
		c.picker.m[i].down = true
	}
	c.mu.Unlock()
	cn.Close() // keep sees Done and redials
}

// pick chooses a member not in tried and counts the request there.
func (c *Client) pick(tried []bool) (int, *rsocket.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	usable := func(i int) bool {
		if c.conns[i] == nil || (tried != nil && tried[i]) {
			return false
		}
		if lr, ok := any(c.conns[i]).(LeaseReporter); ok && !lr.LeaseAvailable() {
			return false
		}
		return true
	}
	var i int
	var ok bool
	if c.opts.policy == RoundRobin {
		i, ok = c.picker.PickRoundRobin(usable)
	} else {
		i, ok = c.picker.Pick(c.now(), c.rng, usable)
	}
	if !ok {
		return 0, nil, ErrNoServer
	}
	c.picker.Start(i)
	c.served[i]++
	return i, c.conns[i], nil
}

func (c *Client) done(i int, rtt time.Duration) {
	c.mu.Lock()
	c.picker.Done(i, c.now(), rtt)
	c.mu.Unlock()
}

// connFailed reports whether err means cn died (not an answer from the server).
// A connection-scoped code (CONNECTION_ERROR, CONNECTION_CLOSE) in a
// request's error says so by itself: the stream fails with it before the
// connection's Done channel is closed, and a caller that looked only at
// Done could see it still open.
func connFailed(cn *rsocket.Conn, err error) bool {
	if errors.Is(err, rsocket.ErrClosed) {
		return true
	}
	var re *rsocket.Error
	if errors.As(err, &re) && re.Code.IsConnectionScoped() {
		return true
	}
	select {
	case <-cn.Done():
		return re == nil
	default:
		return false
	}
}

// do runs one request with the retry rules; call returns whether the
// result is a latency sample.
func (c *Client) do(ctx context.Context, call func(cn *rsocket.Conn) (sample bool, err error)) error {
	idem := c.opts.idempotent || ctx.Value(idemKey{}) != nil
	c.mu.Lock()
	c.budget.Deposit()
	c.mu.Unlock()
	var tried []bool
	for {
		i, cn, err := c.pick(tried)
		if err != nil {
			return err
		}
		t0 := time.Now()
		sample, err := call(cn)
		if err == nil || !connFailed(cn, err) {
			rtt := time.Duration(0)
			if sample && err == nil {
				rtt = max(time.Since(t0), 1)
			}
			c.done(i, rtt)
			return err
		}
		c.done(i, 0)
		c.markDown(i, cn)
		if !idem || ctx.Err() != nil {
			return err
		}
		if tried == nil {
			tried = make([]bool, len(c.urls))
		}
		tried[i] = true
		c.mu.Lock()
		okRetry := c.budget.Withdraw(c.now())
		c.mu.Unlock()
		if !okRetry {
			return fmt.Errorf("balance: retry budget exhausted: %w", err)
		}
	}
}

// RequestResponse sends p to one server and waits for its response.
func (c *Client) RequestResponse(ctx context.Context, p rsocket.Payload) (rsocket.Payload, error) {
	var out rsocket.Payload
	err := c.do(ctx, func(cn *rsocket.Conn) (bool, error) {
		var err error
		out, err = cn.RequestResponse(ctx, p)
		return true, err
	})
	return out, err
}

// FireAndForget sends p to one server.
func (c *Client) FireAndForget(ctx context.Context, p rsocket.Payload) error {
	return c.do(ctx, func(cn *rsocket.Conn) (bool, error) { return false, cn.FireAndForget(ctx, p) })
}

// RequestStream opens a stream on one server (see rsocket.Conn.RequestStream).
func (c *Client) RequestStream(ctx context.Context, p rsocket.Payload, n uint32) (*rsocket.Stream, error) {
	var s *rsocket.Stream
	err := c.do(ctx, func(cn *rsocket.Conn) (bool, error) {
		var err error
		s, err = cn.RequestStream(ctx, p, n)
		return false, err
	})
	return s, err
}

// RequestChannel opens a channel on one server (see rsocket.Conn.RequestChannel).
func (c *Client) RequestChannel(ctx context.Context, p rsocket.Payload, n uint32) (*rsocket.Channel, error) {
	var ch *rsocket.Channel
	err := c.do(ctx, func(cn *rsocket.Conn) (bool, error) {
		var err error
		ch, err = cn.RequestChannel(ctx, p, n)
		return false, err
	})
	return ch, err
}

// MetadataPush sends metadata to every connected server: it is
// connection-level state (routing tables, tokens) that each of them needs.
// It fails only if no server got it.
func (c *Client) MetadataPush(ctx context.Context, metadata []byte) error {
	c.mu.Lock()
	conns := make([]*rsocket.Conn, 0, len(c.conns))
	for _, cn := range c.conns {
		if cn != nil {
			conns = append(conns, cn)
		}
	}
	c.mu.Unlock()
	var errs []error
	for _, cn := range conns {
		if err := cn.MetadataPush(ctx, metadata); err != nil {
			errs = append(errs, err)
		}
	}
	if len(conns) == 0 {
		return ErrNoServer
	}
	if len(errs) == len(conns) {
		return errors.Join(errs...)
	}
	return nil
}

// Stats is a snapshot of one member.
type Stats struct {
	URL         string
	Up          bool
	Requests    uint64 // sent to it, retries included
	Outstanding int
}

// Stats returns every member's state, in the order of the URLs.
func (c *Client) Stats() []Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Stats, len(c.urls))
	for i, u := range c.urls {
		out[i] = Stats{URL: u, Up: c.conns[i] != nil, Requests: c.served[i], Outstanding: c.picker.Outstanding(i)}
	}
	return out
}

// Close closes every connection and stops redialling.
func (c *Client) Close() error {
	c.cancel()
	c.mu.Lock()
	conns := append([]*rsocket.Conn(nil), c.conns...)
	c.mu.Unlock()
	for _, cn := range conns {
		if cn != nil {
			cn.Close()
		}
	}
	c.wg.Wait()
	return nil
}
