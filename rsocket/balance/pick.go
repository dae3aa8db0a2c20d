package balance

import (
	"math"
	"math/rand"
	"time"
)

// This file is the pure part of the balancer: no I/O, clock or goroutine.
// Time comes in as an offset from an origin the caller chooses, randomness
// from the caller's *rand.Rand, so tests drive it with fake time and a
// seeded PRNG.

// Config tunes the picker.
type Config struct {
	// Decay is the EWMA time constant: a sample older than Decay weighs
	// 1/e as much as a fresh one. Also the time over which an idle
	// member's cost fades, so that a member that was slow once is tried
	// again instead of being starved forever.
	Decay time.Duration
	// InitialLatency is the cost of a member with no sample while no
	// member has one either.
	InitialLatency time.Duration
	// BackoffBase and BackoffMax bound the redial delay after the n-th
	// consecutive failure: min(Max, Base·2ⁿ⁻¹), jittered to [½, 1]× that.
	BackoffBase, BackoffMax time.Duration
}

// DefaultConfig is what Dial uses unless told otherwise.
var DefaultConfig = Config{Decay: 200 * time.Millisecond, InitialLatency: time.Millisecond,
	BackoffBase: 50 * time.Millisecond, BackoffMax: 5 * time.Second}

type memberStats struct {
	ewma        float64       // peak EWMA of latency, nanoseconds
	last        time.Duration // time of the last sample
	sampled     bool
	outstanding int
	down        bool
	failures    int // consecutive, for the backoff
}

// Picker keeps per-member latency and load and chooses one member per
// request. Not safe for concurrent use: the Client holds a lock around it.
type Picker struct {
	cfg Config
	m   []memberStats
	rr  int
}

// NewPicker returns a picker over n members, all up.
func NewPicker(n int, cfg Config) *Picker {
	if cfg.Decay <= 0 {
		cfg.Decay = DefaultConfig.Decay
	}
	if cfg.InitialLatency <= 0 {
		cfg.InitialLatency = DefaultConfig.InitialLatency
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultConfig.BackoffBase
	}
	if cfg.BackoffMax < cfg.BackoffBase {
		cfg.BackoffMax = max(cfg.BackoffBase, DefaultConfig.BackoffMax)
	}
	return &Picker{cfg: cfg, m: make([]memberStats, n)}
}

// latency is member i's EWMA at now. An idle member's estimate decays
// toward zero with the time since its last sample: without that, a member
// that was slow once would never be chosen again and could never show
// that it recovered.
func (p *Picker) latency(i int, now time.Duration, fallback float64) float64 {
	s := &p.m[i]
	if !s.sampled {
		return fallback
	}
	if s.outstanding > 0 {
		return s.ewma
	}
	idle := float64(now - s.last)
	if idle <= 0 {
		return s.ewma
	}
	return s.ewma * math.Exp(-idle/float64(p.cfg.Decay))
}

// Cost is EWMA latency × (outstanding + 1): the expected wait of a new
// request if the member serves its queue one at a time.
func (p *Picker) Cost(i int, now time.Duration) float64 {
	return p.latency(i, now, p.fallback(now)) * float64(p.m[i].outstanding+1)
}

// fallback is the latency assumed for a member without samples (new or
// redialled): the best sampled estimate, so that it gets its share at once
// instead of waiting behind members that have a history.
func (p *Picker) fallback(now time.Duration) float64 {
	best := math.Inf(1)
	for i := range p.m {
		if p.m[i].sampled && !p.m[i].down {
			best = min(best, p.latency(i, now, 0))
		}
	}
	if math.IsInf(best, 1) {
		return float64(p.cfg.InitialLatency)
	}
	return best
}

// Pick chooses a member by power of two choices: two distinct usable
// members at random, the cheaper one wins (ties: the first drawn). usable
// may be nil; it excludes members (no lease, already failed this request).
// ok is false when no member is up and usable.
func (p *Picker) Pick(now time.Duration, r *rand.Rand, usable func(i int) bool) (i int, ok bool) {
	cand := p.candidates(usable)
	switch len(cand) {
	case 0:
		return 0, false
	case 1:
		return cand[0], true
	}
	a := r.Intn(len(cand))
	b := r.Intn(len(cand) - 1)
	if b >= a {
		b++
	}
	fb := p.fallback(now)
	ca := p.latency(cand[a], now, fb) * float64(p.m[cand[a]].outstanding+1)
	cb := p.latency(cand[b], now, fb) * float64(p.m[cand[b]].outstanding+1)
	if cb < ca {
		return cand[b], true
	}
	return cand[a], true
}

// PickRoundRobin is the baseline the bench compares with: the next usable
// member in turn, blind to latency and load.
func (p *Picker) PickRoundRobin(usable func(i int) bool) (int, bool) {
	for k := range p.m {
		i := (p.rr + k) % len(p.m)
		if !p.m[i].down && (usable == nil || usable(i)) {
			p.rr = i + 1
			return i, true
		}
	}
	return 0, false
}

func (p *Picker) candidates(usable func(int) bool) []int {
	cand := make([]int, 0, len(p.m))
	for i := range p.m {
		if !p.m[i].down && (usable == nil || usable(i)) {
			cand = append(cand, i)
		}
	}
	return cand
}

// Start counts a request sent to member i.
func (p *Picker) Start(i int) { p.m[i].outstanding++ }

// Done ends a request Start counted. rtt > 0 is a latency sample (peak
// EWMA: a sample above the estimate replaces it at once, one below pulls
// it down with weight by the time since the last sample), rtt <= 0 is no
// sample (the request failed or had no answer to time).
func (p *Picker) Done(i int, now, rtt time.Duration) {
	s := &p.m[i]
	if s.outstanding > 0 {
		s.outstanding--
	}
	if rtt <= 0 {
		return
	}
	x := float64(rtt)
	switch {
	case !s.sampled || x > s.ewma:
		s.ewma = x
	default:
		w := math.Exp(-float64(max(now-s.last, 0)) / float64(p.cfg.Decay))
		s.ewma = s.ewma*w + x*(1-w)
	}
	s.sampled, s.last = true, now
}

// Failed marks member i down after its connection failed (or a dial
// failed) and returns how long to wait before redialling: exponential in
// the consecutive failures, capped, with jitter so that clients that lost
// the same server do not all redial it at the same instant.
func (p *Picker) Failed(i int, r *rand.Rand) time.Duration {
	s := &p.m[i]
	s.down = true
	s.failures++
	return Backoff(s.failures, p.cfg.BackoffBase, p.cfg.BackoffMax, r)
}

// Up marks member i usable again with a fresh history: a restarted server
// is a new server, its old latency says nothing.
func (p *Picker) Up(i int) {
	p.m[i] = memberStats{}
}

// IsDown reports whether member i is marked down.
func (p *Picker) IsDown(i int) bool { return p.m[i].down }

// Outstanding is member i's count of requests in flight.
func (p *Picker) Outstanding(i int) int { return p.m[i].outstanding }

// Backoff is the delay before attempt n+1 after n >= 1 consecutive
// failures: d = min(max, base·2ⁿ⁻¹), then uniform in [d/2, d].
func Backoff(n int, base, maxDelay time.Duration, r *rand.Rand) time.Duration {
	if n < 1 {
		n = 1
	}
	d := maxDelay
	if n-1 < 62 && base<<(n-1) > 0 && base<<(n-1) < maxDelay {
		d = base << (n - 1)
	}
	half := d / 2
	return half + time.Duration(r.Int63n(int64(d-half)+1))
}

// Budget bounds retries: each request deposits Ratio of a retry, each
// retry withdraws one, and a floor of MinPerSecond retries per second
// (at most one second's worth banked) lets a client with little traffic
// still retry. A burst of failures thus costs at most Ratio more requests
// plus the floor, never an unbounded storm on the surviving servers.
type Budget struct {
	Ratio        float64
	MinPerSecond float64
	// Cap bounds the banked ratio tokens, so a long calm does not buy an
	// unbounded burst later.
	Cap float64

	tokens, floor float64
	last          time.Duration
	started       bool
}

// NewBudget returns a budget of ratio retries per request plus
// minPerSecond, banking at most capTokens.
func NewBudget(ratio, minPerSecond, capTokens float64) *Budget {
	return &Budget{Ratio: ratio, MinPerSecond: minPerSecond, Cap: capTokens}
}

// Deposit is called once per original request.
func (b *Budget) Deposit() { b.tokens = min(b.Cap, b.tokens+b.Ratio) }

// Withdraw takes one retry if the budget has one at now.
func (b *Budget) Withdraw(now time.Duration) bool {
	if !b.started {
		b.started, b.last, b.floor = true, now, b.MinPerSecond
	}
	if now > b.last {
		b.floor = min(b.MinPerSecond, b.floor+b.MinPerSecond*(now-b.last).Seconds())
		b.last = now
	}
	switch {
	case b.tokens >= 1-1e-9: // 10 × 0.1 is a hair under 1 in floating point
		b.tokens--
	case b.floor >= 1-1e-9:
		b.floor--
	default:
		return false
	}
	return true
}
