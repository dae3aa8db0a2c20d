package netem

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	limitedChunk = 16 << 10 // largest read and scheduling unit with a rate limit
	// fastChunk is the largest unit at fastRate and above: 64 KiB take
	// 0.5 ms at 1 Gbit/s, fine-grained enough, and halve the proxy's CPU
	// per byte compared with 16 KiB chunks.
	fastChunk      = 64 << 10
	fastRate       = 256e6 / 8
	minChunk       = 1500     // smallest: about a packet
	chunkTime      = 500      // 1/chunkTime s: the time a chunk takes at Rate
	unlimitedChunk = 64 << 10 // read unit without one
	minBurst       = 64 << 10
	minQueue       = 256 << 10
	minWindow      = 4 << 20 // per-flow in-flight cap floor when Rate == 0
	windowRate     = 250e6   // bytes/s a flow may keep in flight when Rate == 0
)

// Config describes the emulated link.
type Config struct {
	// Target is the HOST:PORT that every accepted connection is forwarded to.
	Target string

	// Rate is the bottleneck rate in bytes per second, 0 for unlimited. It
	// applies to each direction separately, as on a full-duplex link: all
	// connections' client→server bytes share one Rate, and all their
	// server→client bytes share another.
	Rate int64

	// Delay is the one-way propagation delay; it adds 2×Delay to the RTT.
	Delay time.Duration

	// Jitter adds a uniform random offset in [-Jitter, +Jitter] to each
	// chunk's delay. It never reorders bytes of a connection (see the
	// package documentation).
	Jitter time.Duration

	// Burst is the depth of the token bucket in bytes: how much may pass at
	// once after the link was idle. 0 means max(64 KiB, Rate×1ms).
	Burst int64

	// QueueBytes is the bottleneck buffer: bytes waiting for the link beyond
	// which the proxy stops reading from senders. 0 means
	// max(256 KiB, Rate×100ms). Unused when Rate is 0.
	QueueBytes int64

	// Seed seeds the jitter. Given the same Seed and the same order of
	// accepted connections the jitter sequence is the same.
	Seed int64
}

// Stats counts what a Link has done.
type Stats struct {
	Accepted   int64 // client connections accepted
	Active     int64 // connections open now
	Resets     int64 // connections reset by ResetAll
	Aborted    int64 // connections reset because one side failed or reset
	DialErrors int64 // accepted connections whose dial to Target failed
	BytesUp    int64 // client→server bytes delivered to servers
	BytesDown  int64 // server→client bytes delivered to clients
}

// ErrClosed is returned by Serve and Listen once the Link is closed.
var ErrClosed = errors.New("netem: link closed")

// Link is an emulated link. Create it with New, feed it client connections
// with Listen or Serve, and stop it with Close.
type Link struct {
	cfg    Config
	epoch  time.Time
	up     *direction // client → server
	down   *direction // server → client
	window int64      // per-flow in-flight cap
	lag    wakeLag    // fine timer overshoot estimate
	trace  *tracer    // tests only; nil otherwise

	ctx    context.Context // cancelled by Close; aborts dials
	cancel context.CancelFunc
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	pairs     map[*pair]struct{}
	nextID    uint64

	accepted   atomic.Int64
	resets     atomic.Int64
	aborted    atomic.Int64
	dialErrors atomic.Int64
}

// New validates cfg, fills in defaults and returns a Link that is not yet
// accepting connections.
func New(cfg Config) (*Link, error) { return newLink(cfg, nil) }

// newLink is New with a tracer (nil: none), which must be in place before
// the schedulers start.
func newLink(cfg Config, tr *tracer) (*Link, error) {
	if _, _, err := net.SplitHostPort(cfg.Target); err != nil {
		return nil, fmt.Errorf("netem: bad Target %q: %w", cfg.Target, err)
	}
	switch {
	case cfg.Rate < 0:
		return nil, errors.New("netem: negative Rate")
	case cfg.Delay < 0:
		return nil, errors.New("netem: negative Delay")
	case cfg.Jitter < 0:
		return nil, errors.New("netem: negative Jitter")
	case cfg.Burst < 0:
		return nil, errors.New("netem: negative Burst")
	case cfg.QueueBytes < 0:
		return nil, errors.New("netem: negative QueueBytes")
	}
	if cfg.Burst == 0 {
		cfg.Burst = max(minBurst, cfg.Rate/1000)
	}
	if cfg.QueueBytes == 0 {
		cfg.QueueBytes = max(minQueue, cfg.Rate/10)
	}
	chunk := int64(unlimitedChunk)
	if cfg.Rate > 0 {
		largest := int64(limitedChunk)
		if cfg.Rate >= fastRate {
			largest = fastChunk
		}
		chunk = min(largest, max(minChunk, cfg.Rate/chunkTime), cfg.Burst)
	}
	span := (cfg.Delay + cfg.Jitter).Seconds()
	window := max(minWindow, int64(windowRate*span)) + 4*chunk
	if cfg.Rate > 0 {
		window = 2*(cfg.QueueBytes+cfg.Burst+int64(float64(cfg.Rate)*span)) + 4*chunk
	}

	ctx, cancel := context.WithCancel(context.Background())
	l := &Link{
		cfg:       cfg,
		epoch:     time.Now(),
		window:    window,
		trace:     tr,
		ctx:       ctx,
		cancel:    cancel,
		done:      make(chan struct{}),
		listeners: make(map[net.Listener]struct{}),
		pairs:     make(map[*pair]struct{}),
	}
	l.up = newDirection(l, int(chunk))
	l.down = newDirection(l, int(chunk))
	if cfg.Rate > 0 {
		l.wg.Add(2)
		go l.up.run()
		go l.down.run()
	}
	return l, nil
}

// Config returns the configuration in use, defaults filled in.
func (l *Link) Config() Config { return l.cfg }

// now is the link's clock: monotonic time since New.
func (l *Link) now() time.Duration { return time.Since(l.epoch) }

// Listen listens on the TCP address addr (such as "127.0.0.1:0"), serves it
// in the background until Close, and returns the address clients should
// dial.
func (l *Link) Listen(addr string) (string, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		lis.Close()
		return "", ErrClosed
	}
	l.listeners[lis] = struct{}{}
	l.wg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		l.Serve(lis)
	}()
	return lis.Addr().String(), nil
}

// Serve accepts connections on lis and forwards each through the link until
// Close (then it returns ErrClosed) or until Accept fails for good. Serve
// closes lis when it returns.
func (l *Link) Serve(lis net.Listener) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		lis.Close()
		return ErrClosed
	}
	l.listeners[lis] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.listeners, lis)
		l.mu.Unlock()
		lis.Close()
	}()

	var backoff time.Duration
	for {
		c, err := lis.Accept()
		if err != nil {
			if l.isClosed() {
				return ErrClosed
			}
			if !retryableAccept(err) {
				return err
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-l.done:
				return ErrClosed
			}
			continue
		}
		backoff = 0
		l.accepted.Add(1)
		p := &pair{l: l, client: c, done: make(chan struct{})}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return ErrClosed
		}
		l.nextID++
		p.id = l.nextID
		l.pairs[p] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go p.run()
	}
}

func retryableAccept(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EINTR)
}

func (l *Link) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Close stops accepting, closes every connection (without resetting them)
// and waits for all of the Link's goroutines to end. It is safe to call more
// than once.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.wg.Wait()
		return nil
	}
	l.closed = true
	var lis []net.Listener
	for x := range l.listeners {
		lis = append(lis, x)
	}
	pairs := l.livePairsLocked()
	l.mu.Unlock()

	l.cancel()
	close(l.done)
	for _, x := range lis {
		x.Close()
	}
	for _, p := range pairs {
		p.teardown(false)
	}
	l.wg.Wait()
	return nil
}

// ResetAll resets every live connection: both its client and its server
// socket are closed with SO_LINGER 0, so both peers get an RST, as they might
// when a flapping link makes a middlebox drop its state. Data still in the
// link is lost. The Link goes on accepting. It returns how many connections
// it reset.
func (l *Link) ResetAll() int {
	l.mu.Lock()
	pairs := l.livePairsLocked()
	l.mu.Unlock()
	n := 0
	for _, p := range pairs {
		if p.teardown(true) {
			n++
		}
	}
	l.resets.Add(int64(n))
	return n
}

func (l *Link) livePairsLocked() []*pair {
	ps := make([]*pair, 0, len(l.pairs))
	for p := range l.pairs {
		ps = append(ps, p)
	}
	return ps
}

// Stats returns counters since New.
func (l *Link) Stats() Stats {
	l.mu.Lock()
	active := int64(len(l.pairs))
	l.mu.Unlock()
	return Stats{
		Accepted:   l.accepted.Load(),
		Active:     active,
		Resets:     l.resets.Load(),
		Aborted:    l.aborted.Load(),
		DialErrors: l.dialErrors.Load(),
		BytesUp:    l.up.delivered.Load(),
		BytesDown:  l.down.delivered.Load(),
	}
}

// pair is one proxied connection: the client's socket, ours to the server,
// and a flow each way.
type pair struct {
	l      *Link
	id     uint64
	client net.Conn
	done   chan struct{} // closed by teardown
	once   sync.Once
	ended  atomic.Int32 // directions whose end of stream was delivered

	// set under l.mu once the dial succeeded
	server   net.Conn
	up, down *flow
}

// run dials the target and then pumps both directions. It is counted in
// l.wg by Serve.
func (p *pair) run() {
	l := p.l
	defer l.wg.Done()
	var d net.Dialer
	srv, err := d.DialContext(l.ctx, "tcp", l.cfg.Target)
	if err != nil {
		if p.teardown(true) {
			l.dialErrors.Add(1)
		}
		return
	}
	seed := uint64(l.cfg.Seed)
	up := newFlow(p, l.up, p.client, srv, rand.NewPCG(seed, 2*p.id))
	down := newFlow(p, l.down, srv, p.client, rand.NewPCG(seed, 2*p.id+1))
	l.mu.Lock()
	select {
	case <-p.done: // torn down while dialing
		l.mu.Unlock()
		srv.Close()
		return
	default:
	}
	p.server, p.up, p.down = srv, up, down
	l.wg.Add(3)
	l.mu.Unlock()

	go func() { defer l.wg.Done(); up.writeLoop() }()
	go func() { defer l.wg.Done(); down.readLoop() }()
	go func() { defer l.wg.Done(); down.writeLoop() }()
	up.readLoop()
}

// endOne records that one direction delivered its end of stream; after both
// the pair is closed normally.
func (p *pair) endOne() {
	if p.ended.Add(1) == 2 {
		p.teardown(false)
	}
}

// abort resets both sides after a failure and counts it.
func (p *pair) abort() {
	if p.teardown(true) {
		p.l.aborted.Add(1)
	}
}

// teardown closes both sockets, with an RST if rst, wakes every goroutine of
// the pair and drops the data still in the link. Only the first call acts;
// it reports whether this was it.
func (p *pair) teardown(rst bool) bool {
	did := false
	p.once.Do(func() {
		did = true
		l := p.l
		l.mu.Lock()
		delete(l.pairs, p)
		srv, up, down := p.server, p.up, p.down
		l.mu.Unlock()

		close(p.done)
		for _, c := range []net.Conn{p.client, srv} {
			if c == nil {
				continue
			}
			if rst {
				if lc, ok := c.(interface{ SetLinger(int) error }); ok {
					lc.SetLinger(0)
				}
			}
			c.Close()
		}
		if up != nil {
			up.purge()
			down.purge()
		}
	})
	return did
}
