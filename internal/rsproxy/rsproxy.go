// Package rsproxy is a TCP load balancer for RSocket servers that keeps
// resumption working across them: a RESUME goes to the server that holds
// its session.
//
// An RSocket server keeps a resumable session in its own memory, so a
// balancer that spreads connections blindly sends a client's RESUME to
// a server that never saw its token, which rejects it (ERROR
// REJECTED_RESUME) and every stream of the session fails. The proxy reads
// the first frame of each connection (the spec says it is SETUP or
// RESUME, both on stream 0) and routes by the resume token:
//
//   - a SETUP with a token goes to the token's first server by rendezvous
//     hashing (highest hash of token and server address), or, when that
//     one cannot be dialled, the next in the same order; the proxy
//     remembers where it went;
//   - a RESUME goes where its SETUP went, or, for a token the proxy does
//     not remember (evicted, or seen by another proxy instance, or by this
//     one before a restart), to the token's first server by the same
//     hashing, which is where its SETUP went unless that server was down
//     at the time;
//   - a SETUP without a token goes round-robin to a server that can be
//     dialled.
//
// So several proxies, or one restarted, route the same token to the same
// server without sharing state. After the first frame the proxy only
// copies bytes. If the server holding a session cannot be dialled, the
// RESUME's connection is closed without an answer: the client redials
// with backoff, and its session's lifetime bounds the wait, rather than a
// REJECTED_RESUME that would end a session a restarting server might
// still hold (any ERROR answering a RESUME ends the session in sluice's
// client). A SETUP that no server can be dialled for is answered
// ERROR[REJECTED_SETUP] naming the servers and why, rather than a reset
// without a hint: the spec's code for a valid SETUP the server will not
// take; the client may try again later.
//
// Ready (the daemon's /readyz) is nil while some server is reachable as
// far as the proxy knows: the last dial to it succeeded and no
// connection to it was since ended by the server. While none is, Ready
// dials the servers itself, so that it turns nil once one comes back
// without a client failing first; while one is, it dials nothing.
//
// TLS cannot be balanced this way (the first frame is encrypted); the
// proxy speaks plain TCP on both sides.
package rsproxy

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
	"github.com/sluicehq/sluice/rsocket/netaccept"
)

// Config configures a Proxy.
type Config struct {
	// Backends are the servers, host:port (required).
	Backends []string
	// Affinity routes by resume token (the point of the proxy). Off, every
	// connection goes round-robin, as a plain TCP balancer would route it:
	// for comparison and tests.
	Affinity bool
	// MaxFirstFrame bounds the first frame read before routing (default
	// 64 KiB: a SETUP's metadata and data; a longer first frame closes the
	// connection).
	MaxFirstFrame int
	// FirstFrameTimeout bounds the wait for it (default 10s).
	FirstFrameTimeout time.Duration
	// DialTimeout bounds a dial to a server (default 5s).
	DialTimeout time.Duration
	// MaxTokens bounds the remembered token → server routes (default
	// DefaultMaxTokens; the oldest is forgotten first, and falls back to
	// hashing).
	MaxTokens int
	// MaxPending bounds the connections whose first frame is still being
	// read (default 1,024): each may hold up to MaxFirstFrame bytes, so a
	// flood of clients that connect and trickle costs at most
	// MaxPending × MaxFirstFrame. Beyond it new connections are closed at
	// once.
	MaxPending int
	Logger     *slog.Logger
}

// DefaultMaxTokens is Config.MaxTokens's default.
const DefaultMaxTokens = 100_000

// Stats counts what the proxy routed.
type Stats struct {
	Setups, ResumableSetups, Resumes uint64
	// ResumesRemembered went where the proxy remembered their SETUP went;
	// the rest were routed by hashing alone.
	ResumesRemembered uint64
	// Refused: first frames that were neither SETUP nor RESUME, too long,
	// malformed or too late, and connections beyond MaxPending.
	Refused uint64
	// DialFailures: dials to a server that failed (Ready's included).
	DialFailures uint64
	// RejectedSetups: SETUPs answered ERROR[REJECTED_SETUP] because no
	// server could be dialled.
	RejectedSetups uint64
}

// Server states, as far as the proxy knows (Proxy.state).
const (
	stateUnknown = iota // never dialled, or a connection to it was ended by the server
	stateUp             // the last dial succeeded
	stateDown           // the last dial failed (Proxy.lastErr)
)

// Proxy routes RSocket connections to Config.Backends.
type Proxy struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	routes map[string]int // token → backend index
	order  []string       // tokens in insertion order, for eviction
	head   int            // order[head:] are live entries
	rr     int
	// pending (capacity MaxPending) holds a slot per connection whose
	// first frame is being read.
	pending chan struct{}
	// state and lastErr, per server, under mu: what the last dial to it
	// found (stateUp, stateDown and why), or stateUnknown.
	state   []int
	lastErr []error
	// probing serializes Ready's dials: at most one round at a time.
	probing sync.Mutex
	// dialer dials a server (tests replace it).
	dialer func(ctx context.Context, addr string) (net.Conn, error)

	setups, resumableSetups, resumes, remembered, refused, dialFailures, rejected atomic.Uint64
}

// New returns a proxy for cfg.
func New(cfg Config) (*Proxy, error) {
	if len(cfg.Backends) == 0 {
		return nil, errors.New("rsproxy: no backends")
	}
	if cfg.MaxFirstFrame <= 0 {
		cfg.MaxFirstFrame = 64 << 10
	}
	if cfg.FirstFrameTimeout <= 0 {
		cfg.FirstFrameTimeout = 10 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 1024
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := net.Dialer{Timeout: cfg.DialTimeout}
	return &Proxy{cfg: cfg, log: cfg.Logger, routes: map[string]int{}, pending: make(chan struct{}, cfg.MaxPending),
		state: make([]int, len(cfg.Backends)), lastErr: make([]error, len(cfg.Backends)),
		dialer: func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }}, nil
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	return Stats{Setups: p.setups.Load(), ResumableSetups: p.resumableSetups.Load(), Resumes: p.resumes.Load(),
		ResumesRemembered: p.remembered.Load(), Refused: p.refused.Load(), DialFailures: p.dialFailures.Load(),
		RejectedSetups: p.rejected.Load()}
}

// Ready is nil while a server is reachable as far as the proxy knows;
// otherwise it dials every server not known reachable (one round at a
// time; concurrent callers wait for it) and returns nil if one answered,
// or an error naming each server and why it cannot be reached.
func (p *Proxy) Ready() error {
	if p.anyUp() {
		return nil
	}
	p.probing.Lock()
	defer p.probing.Unlock()
	if p.anyUp() { // a client's dial, or the round we waited for, found one
		return nil
	}
	var wg sync.WaitGroup
	for i := range p.cfg.Backends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s, err := p.dial(context.Background(), i); err == nil {
				s.Close()
			}
		}()
	}
	wg.Wait()
	if p.anyUp() {
		return nil
	}
	return p.downError(nil)
}

// anyUp reports whether the last dial to some server succeeded.
func (p *Proxy) anyUp() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.state {
		if st == stateUp {
			return true
		}
	}
	return false
}

// downError names why the servers (all, or those of idx) cannot be
// reached, from their last dials, on one line.
func (p *Proxy) downError(idx []int) error {
	if idx == nil {
		idx = make([]int, len(p.cfg.Backends))
		for i := range idx {
			idx[i] = i
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	b.WriteString("no RSocket server reachable: ")
	for k, i := range idx {
		if k > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.cfg.Backends[i])
		if err := p.lastErr[i]; err != nil && p.state[i] == stateDown {
			b.WriteString(": ")
			b.WriteString(dialReason(err))
		} else {
			b.WriteString(": not dialled yet")
		}
	}
	return errors.New(b.String())
}

// dialReason is a dial error without the "dial tcp ADDR:" the message
// already names.
func dialReason(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// dial dials server i, recording what it found.
func (p *Proxy) dial(ctx context.Context, i int) (net.Conn, error) {
	s, err := p.dialer(ctx, p.cfg.Backends[i])
	if ctx.Err() != nil {
		// Shutdown, not the server: nothing learnt.
		return s, err
	}
	p.mu.Lock()
	if err == nil {
		p.state[i], p.lastErr[i] = stateUp, nil
	} else {
		p.state[i], p.lastErr[i] = stateDown, err
	}
	p.mu.Unlock()
	if err != nil {
		p.dialFailures.Add(1)
		p.log.Warn("rsproxy: cannot dial server", "server", p.cfg.Backends[i], "err", err)
	}
	return s, err
}

// serverEnded records that server i ended a proxied connection: it may
// have gone, so the next Ready dials it again rather than trust the
// last dial (unless another server is known up).
func (p *Proxy) serverEnded(i int) {
	p.mu.Lock()
	if p.state[i] == stateUp {
		p.state[i] = stateUnknown
	}
	p.mu.Unlock()
}

// Serve accepts connections on ln until ctx ends (then it closes ln and
// every proxied connection, and returns nil) or Accept fails.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	return netaccept.Serve(ctx, ln, func(c net.Conn) error {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.handle(ctx, c)
		}()
		return nil
	})
}

// handle routes one client connection by its first frame, then copies
// both ways until either side ends.
func (p *Proxy) handle(ctx context.Context, c net.Conn) {
	defer c.Close()
	// Shutdown ends the connection at once, also while its first frame
	// is still being read.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	select {
	case p.pending <- struct{}{}:
	default:
		p.refused.Add(1)
		p.log.Warn("rsproxy: too many connections without a first frame yet; closing a new one", "max", p.cfg.MaxPending)
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(p.cfg.FirstFrameTimeout))
	first, err := frame.ReadLengthPrefixed(c, nil, p.cfg.MaxFirstFrame)
	<-p.pending
	if err != nil {
		p.refused.Add(1)
		p.log.Debug("rsproxy: no first frame", "client", c.RemoteAddr().String(), "err", err)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	candidates, token, err := p.route(first)
	if err != nil {
		p.refused.Add(1)
		p.log.Warn("rsproxy: connection refused", "client", c.RemoteAddr().String(), "err", err)
		return
	}
	var s net.Conn
	server := -1
	for _, i := range candidates {
		if s, err = p.dial(ctx, i); err == nil {
			if token != nil {
				p.remember(token, i)
			}
			server = i
			break
		}
	}
	if s == nil {
		if h, _ := frame.ParseHeader(first); h.Type == frame.TypeSetup && ctx.Err() == nil {
			p.rejectSetup(c, p.downError(candidates))
		}
		return
	}
	defer s.Close()
	prefix, _ := frame.AppendLengthPrefix(make([]byte, 0, frame.LengthPrefixSize+len(first)), len(first))
	if _, err := s.Write(append(prefix, first...)); err != nil {
		return
	}
	// Shutdown (which closes c, above) or either side ending ends both:
	// the RSocket peers see a broken connection and resume.
	// The server's side ending first (before the proxy closes it) is
	// recorded before the client's side closes.
	done := make(chan struct{}, 2)
	var ended atomic.Bool
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if !ended.Swap(true) && src == s && ctx.Err() == nil {
			p.serverEnded(server)
		}
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(s, c)
	go pipe(c, s)
	<-done
	<-done
}

// rejectSetup answers a SETUP that no server could be dialled for with
// ERROR[REJECTED_SETUP] and why, then ends the connection: its side
// first, then, once the client closes its own (or after a bounded wait
// and amount), the rest, so that frames the client sent after its SETUP
// and the proxy never read do not turn the close into a reset that
// could discard the ERROR before the client reads it. The wait takes a
// MaxPending slot, as a first frame's does; with none free the
// connection is closed at once.
func (p *Proxy) rejectSetup(c net.Conn, why error) {
	p.rejected.Add(1)
	p.log.Warn("rsproxy: SETUP rejected", "client", c.RemoteAddr().String(), "err", why)
	msg := "rsproxy: " + why.Error()
	if len(msg) > 1024 {
		msg = strings.ToValidUTF8(msg[:1024], "")
	}
	f, err := frame.AppendError(nil, 0, frame.ErrorCodeRejectedSetup, msg)
	if err != nil {
		return
	}
	prefix, _ := frame.AppendLengthPrefix(make([]byte, 0, frame.LengthPrefixSize+len(f)), len(f))
	_ = c.SetWriteDeadline(time.Now().Add(p.cfg.FirstFrameTimeout))
	if _, err := c.Write(append(prefix, f...)); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	select {
	case p.pending <- struct{}{}:
		_ = c.SetReadDeadline(time.Now().Add(p.cfg.FirstFrameTimeout))
		_, _ = io.Copy(io.Discard, io.LimitReader(c, int64(p.cfg.MaxFirstFrame)))
		<-p.pending
	default:
	}
}

// route returns, for a connection whose first frame is first, the servers
// to try in order and the resume token to remember on a successful dial
// (nil: none). A RESUME is tried only where its session should be.
func (p *Proxy) route(first []byte) (candidates []int, remember []byte, err error) {
	h, err := frame.ParseHeader(first)
	if err != nil {
		return nil, nil, err
	}
	switch h.Type {
	case frame.TypeSetup:
		s, err := frame.ParseSetup(first)
		if err != nil {
			return nil, nil, err
		}
		p.setups.Add(1)
		if !s.ResumeEnabled() || !p.cfg.Affinity {
			return p.roundRobin(), nil, nil
		}
		p.resumableSetups.Add(1)
		return p.rendezvous(s.ResumeToken), s.ResumeToken, nil
	case frame.TypeResume:
		r, err := frame.ParseResume(first)
		if err != nil {
			return nil, nil, err
		}
		p.resumes.Add(1)
		if !p.cfg.Affinity {
			return p.roundRobin(), nil, nil
		}
		p.mu.Lock()
		i, ok := p.routes[string(r.ResumeToken)]
		p.mu.Unlock()
		if ok {
			p.remembered.Add(1)
			return []int{i}, nil, nil
		}
		return p.rendezvous(r.ResumeToken)[:1], nil, nil
	default:
		return nil, nil, fmt.Errorf("first frame is %v on stream %d, not SETUP or RESUME", h.Type, h.StreamID)
	}
}

// roundRobin is every server, starting with the next in turn.
func (p *Proxy) roundRobin() []int {
	p.mu.Lock()
	start := p.rr
	p.rr = (p.rr + 1) % len(p.cfg.Backends)
	p.mu.Unlock()
	out := make([]int, len(p.cfg.Backends))
	for k := range out {
		out[k] = (start + k) % len(p.cfg.Backends)
	}
	return out
}

// rendezvous is every server in decreasing order of the hash of token and
// its address: the same order for a token in every proxy, and adding or
// removing a server moves only the tokens whose first choice it is.
func (p *Proxy) rendezvous(token []byte) []int {
	n := len(p.cfg.Backends)
	type scored struct {
		i     int
		score uint64
	}
	s := make([]scored, n)
	for i, b := range p.cfg.Backends {
		h := fnv.New64a()
		_, _ = h.Write(token)
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(b))
		s[i] = scored{i, mix(h.Sum64())}
	}
	// n is small: insertion sort, highest score first.
	for i := 1; i < n; i++ {
		for j := i; j > 0 && s[j].score > s[j-1].score; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	out := make([]int, n)
	for k := range s {
		out[k] = s[k].i
	}
	return out
}

// mix is a 64-bit finalizer (splitmix64's), so that tokens differing in
// a few bytes spread evenly.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// remember records that token's session is on server i, forgetting the
// oldest route beyond MaxTokens.
func (p *Proxy) remember(token []byte, i int) {
	k := string(token)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.routes[k]; !ok {
		p.order = append(p.order, k)
	}
	p.routes[k] = i
	for len(p.routes) > p.cfg.MaxTokens && p.head < len(p.order) {
		delete(p.routes, p.order[p.head])
		p.order[p.head] = ""
		p.head++
	}
	if p.head > len(p.order)/2 && p.head > 1024 {
		p.order = append(p.order[:0], p.order[p.head:]...)
		p.head = 0
	}
}
