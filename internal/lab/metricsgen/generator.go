package metricsgen

import (
	"math"
	"strconv"
)

// kind is how a series' value evolves from one scrape to the next.
type kind uint8

const (
	kindCounter   kind = iota // += rate·dt·load·(1+noise·Z), floored to 1/scale; 0 on restart
	kindMonotonic             // like a counter, but kept across restarts (offsets, sizes)
	kindGauge                 // mean-reverting random walk, rounded to 1/scale
	kindConst                 // never changes
	kindHist                  // histogram member (bucket, _sum or _count) of group
	kindSummary               // summary member (quantile, _sum or _count) of group
	kindStart                 // the target's start time (process_start_time_seconds)
	kindNow                   // the scrape time in seconds (node_time_seconds)
)

// Member indices of histogram and summary series beyond their buckets or
// quantiles.
const (
	memberSum   = 254
	memberCount = 255
)

// series is one time series: its text prefix and how its value evolves.
type series struct {
	lo, hi uint32 // prefix `name{labels} ` in Generator.arena
	group  int32  // index in Generator.groups for kindHist and kindSummary
	part   uint16 // message partition
	kind   kind
	member uint8 // bucket/quantile index, memberSum or memberCount
	load   bool  // counter: scale increments by the target's load
	v      float64
	a      float64 // counter: mean rate per second; gauge: level
	b      float64 // counter: relative noise; gauge: absolute step deviation
	min    float64 // gauge bounds
	max    float64
	scale  float64 // emitted values are multiples of 1/scale; 0: exact
}

// group is the shared state of a histogram or a summary.
type group struct {
	rate  float64   // observations per second
	mean  float64   // mean observation
	sigma float64   // log-normal shape of observations (histograms)
	probs []float64 // histogram: probability of each bucket (not cumulative)
	cum   []float64 // histogram: cumulative bucket counts; summary: quantiles
	sum   float64
	count float64
	quant []float64 // summary: quantile value / median
	med   float64   // summary: median observation
}

// target is one scrape target: a contiguous range of series.
type target struct {
	lo, hi   int32   // series
	glo, ghi int32   // groups
	offset   int64   // ms into each scrape interval
	start    float64 // Unix seconds the target (process or host) started
	load     float64 // mean-reverting around 1; scales request-like counters
	ts       int64   // timestamp of the current scrape
	lastTS   int64
	elapsed  float64 // seconds since the previous scrape, or since the restart
	restarts int32
}

// Generator produces the samples of a simulated fleet, scrape round after
// scrape round, and batches them into messages. It is not safe for
// concurrent use; a Generator per goroutine (with different seeds) scales.
type Generator struct {
	cfg     Config
	rng     rng
	arena   []byte
	series  []series
	groups  []group
	targets []target
	hosts   int
	names   int

	interval int64 // ms
	maxAge   int64 // ms; 0: none
	restartP float64

	round    int64
	ti       int // current target
	cur, end int // next series of the current target, end of its range

	sizes sizeDist
	msgR  rng
	parts []partition
	out   partition // holds the last message returned

	stats Stats
}

// partition accumulates the records of one message in progress.
type partition struct {
	buf    []byte
	ends   []int32
	target int
	first  int64 // timestamp of the first record
}

// Stats counts what a Generator has produced.
type Stats struct {
	Hosts    int // machines in the fleet
	Targets  int // scrape targets (a node exporter per host, plus applications)
	Series   int // distinct time series; each scrape round yields one sample of each
	Families int // distinct metric names

	Rounds   int64 // scrape rounds started
	Restarts int64 // target restarts so far (counter resets)
	Samples  int64 // records produced, by AppendRecord or into messages
	Bytes    int64 // bytes of those records (no framing)

	Messages     int64 // messages returned by NextMessage
	MessageBytes int64 // their bytes (sum of record lengths)

	Time int64 // Unix ms timestamp of the latest sample
}

// New builds the fleet described by cfg. Building the default fleet takes
// about 40 ms and 20 MB; memory grows with Hosts.
func New(cfg Config) (*Generator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Generator{
		cfg:      cfg,
		rng:      newRNG(cfg.Seed, 1),
		msgR:     newRNG(cfg.Seed, 2),
		interval: cfg.ScrapeInterval.Milliseconds(),
		restartP: max(cfg.RestartProbability, 0),
		hosts:    cfg.Hosts,
	}
	if cfg.MaxMessageAge > 0 {
		g.maxAge = max(cfg.MaxMessageAge.Milliseconds(), 1)
	}
	buildFleet(g, newRNG(cfg.Seed, 0))
	g.sizes = newSizeDist(float64(cfg.MeanMessageBytes), float64(cfg.MinMessageBytes),
		float64(cfg.MaxMessageBytes), cfg.MessageSigma)
	g.parts = make([]partition, cfg.Partitions)
	for i := range g.parts {
		g.parts[i].target = g.sizes.draw(&g.msgR)
	}
	g.ti, g.round = len(g.targets)-1, -1
	g.stats = Stats{Hosts: g.hosts, Targets: len(g.targets), Series: len(g.series), Families: g.names}
	return g, nil
}

// Config returns the configuration in use, defaults filled in.
func (g *Generator) Config() Config { return g.cfg }

// Stats returns counts of what g has built and produced so far.
func (g *Generator) Stats() Stats { return g.stats }

// AppendRecord appends the next sample line to dst and returns the extended
// slice: `name{label="value",...} value timestamp_ms`, without a newline.
// Lines follow scrape order: every series of one target, then the next
// target, in order of their scrape offsets. It does not allocate once dst
// has room.
//
// AppendRecord and NextMessage draw from the same stream of samples: a
// sample returned by one is not returned by the other.
func (g *Generator) AppendRecord(dst []byte) []byte {
	s, v, ts := g.step()
	return g.format(dst, s, v, ts)
}

// NextMessage returns the records of the next message, each a sample line
// as AppendRecord makes it, appended to dst[:0]. The returned byte slices
// alias storage inside g: they are valid until the next call to NextMessage,
// which reuses it (copy them to keep them). Each has its capacity set to its
// length, so appending to one does not overwrite another. NextMessage does
// not allocate once dst and its internal buffers have grown to the largest
// message so far.
//
// Every sample goes to the partition of its series (a hash of the series).
// A partition becomes a message when it reaches its target size, drawn from
// the truncated log-normal distribution for each message (the record that
// would take it further past the target than it is short of it starts the
// next message instead), or when an arriving sample is MaxMessageAge newer
// than its first one. So a message holds samples of many unrelated series,
// from many targets. All partitions start empty together, so the first
// messages after New are the small ones; the sizes of all messages
// returned follow the distribution, apart from the messages still being
// filled when one stops.
func (g *Generator) NextMessage(dst [][]byte) [][]byte {
	for {
		s, v, ts := g.step()
		p := &g.parts[s.part]
		start := len(p.buf)
		p.buf = g.format(p.buf, s, v, ts)
		n := len(p.buf) - start
		if start > 0 && (start+n/2 > p.target || (g.maxAge > 0 && ts-p.first >= g.maxAge)) {
			return g.flush(p, start, ts, dst)
		}
		if start == 0 {
			p.first = ts
		}
		p.ends = append(p.ends, int32(len(p.buf)))
	}
}

// flush turns p's records before byte start into the message in g.out and
// starts p's next message with the record from start on.
func (g *Generator) flush(p *partition, start int, ts int64, dst [][]byte) [][]byte {
	o := &g.out
	o.buf = append(o.buf[:0], p.buf[start:]...)
	o.ends = append(o.ends[:0], int32(len(o.buf)))
	p.buf, o.buf = o.buf, p.buf[:start]
	p.ends, o.ends = o.ends, p.ends
	p.first = ts
	p.target = g.sizes.draw(&g.msgR)

	dst = dst[:0]
	prev := int32(0)
	for _, e := range o.ends {
		dst = append(dst, o.buf[prev:e:e])
		prev = e
	}
	g.stats.Messages++
	g.stats.MessageBytes += int64(start)
	return dst
}

// step advances to the next sample and returns its series, value and
// timestamp.
func (g *Generator) step() (*series, float64, int64) {
	if g.cur == g.end {
		g.nextTarget()
	}
	s := &g.series[g.cur]
	g.cur++
	t := &g.targets[g.ti]
	return s, g.value(s, t), t.ts
}

// nextTarget starts the scrape of the next target.
func (g *Generator) nextTarget() {
	g.ti++
	if g.ti == len(g.targets) {
		g.ti = 0
		g.round++
		g.stats.Rounds++
	}
	t := &g.targets[g.ti]
	g.cur, g.end = int(t.lo), int(t.hi)
	t.ts = g.cfg.StartMillis + g.round*g.interval + t.offset + int64(g.rng.intn(3))
	if g.round == 0 {
		t.elapsed = float64(g.interval) / 1000
	} else {
		t.elapsed = float64(t.ts-t.lastTS) / 1000
	}
	t.lastTS = t.ts
	t.load += 0.1*(1-t.load) + 0.03*g.rng.norm()
	t.load = min(max(t.load, 0.3), 3)
	if g.restartP > 0 && g.round > 0 && g.rng.float() < g.restartP {
		g.restart(t)
	}
	g.stats.Time = t.ts
}

// restart resets the counters of t as if it had started a moment ago.
func (g *Generator) restart(t *target) {
	up := t.elapsed * g.rng.between(0.05, 0.95)
	t.start = float64(t.ts)/1000 - up
	t.elapsed = up
	t.restarts++
	g.stats.Restarts++
	for i := t.lo; i < t.hi; i++ {
		if g.series[i].kind == kindCounter {
			g.series[i].v = 0
		}
	}
	for i := t.glo; i < t.ghi; i++ {
		gr := &g.groups[i]
		clear(gr.cum)
		gr.sum, gr.count = 0, 0
	}
}

// value advances s by one scrape of t and returns the value to emit.
func (g *Generator) value(s *series, t *target) float64 {
	switch s.kind {
	case kindCounter, kindMonotonic:
		inc := s.a * t.elapsed * (1 + s.b*g.rng.norm())
		if s.load {
			inc *= t.load
		}
		if inc > 0 {
			s.v += inc
		}
		if s.scale != 0 {
			return math.Floor(s.v*s.scale) / s.scale
		}
		return s.v
	case kindGauge:
		s.v += 0.1*(s.a-s.v) + s.b*g.rng.norm()
		s.v = min(max(s.v, s.min), s.max)
		if s.scale != 0 {
			return math.Round(s.v*s.scale) / s.scale
		}
		return s.v
	case kindHist, kindSummary:
		// The group's first member draws the round's observations; the
		// others (buckets or quantiles, _sum, _count) report them.
		gr := &g.groups[s.group]
		switch s.member {
		case 0:
			if s.kind == kindHist {
				g.observeHist(gr, t)
			} else {
				g.observeSummary(gr, t)
			}
			return gr.cum[0]
		case memberSum:
			return gr.sum
		case memberCount:
			return gr.count
		}
		return gr.cum[s.member]
	case kindStart:
		return math.Floor(t.start*s.scale) / s.scale
	case kindNow:
		return float64(t.ts)/1000 + float64(g.rng.intn(5_000_000))*1e-9
	}
	return s.v
}

// observeHist adds one scrape interval's observations to a histogram. The
// expected count of bucket i is n·probs[i]; counts are rounded at random, so
// each is an integer and _count is exactly the +Inf bucket.
func (g *Generator) observeHist(gr *group, t *target) {
	n := gr.rate * t.elapsed * t.load * (1 + 0.2*g.rng.norm())
	if n <= 0 {
		return
	}
	var running float64
	for i, p := range gr.probs {
		running += math.Floor(n*p + g.rng.float())
		gr.cum[i] += running
	}
	gr.count += running
	gr.sum += running * gr.mean * math.Exp(0.1*g.rng.norm())
}

// observeSummary updates a summary: new quantiles around its median, and
// an integer number of new observations.
func (g *Generator) observeSummary(gr *group, t *target) {
	n := math.Floor(gr.rate*t.elapsed*(1+0.3*g.rng.norm()) + g.rng.float())
	if n > 0 {
		gr.count += n
		gr.sum += n * gr.mean * math.Exp(0.2*g.rng.norm())
	}
	m := gr.med * math.Exp(0.25*g.rng.norm())
	prev := 0.0
	for i, q := range gr.quant {
		v := m * q * math.Exp(0.1*g.rng.norm())
		v = max(v, prev)
		gr.cum[i] = math.Round(v*1e9) / 1e9 // whole nanoseconds
		prev = v
	}
}

// format appends the sample line of s.
func (g *Generator) format(dst []byte, s *series, v float64, ts int64) []byte {
	n := len(dst)
	dst = append(dst, g.arena[s.lo:s.hi]...)
	dst = strconv.AppendFloat(dst, v, 'g', -1, 64)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, ts, 10)
	g.stats.Samples++
	g.stats.Bytes += int64(len(dst) - n)
	return dst
}
