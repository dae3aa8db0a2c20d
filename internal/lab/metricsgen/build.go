package metricsgen

import (
	"math"
	"slices"
	"strings"
)

type label struct{ name, value string }

// builder appends the series of one target after another to a Generator.
type builder struct {
	g     *Generator
	r     *rng
	tl    []label // labels every series of the current target carries
	up    float64 // uptime in seconds of the current target at the first scrape
	pairs []label
	names map[string]struct{}
	t     target
}

// begin starts a target scraped offset ms into each interval, up seconds
// after it started.
func (b *builder) begin(offset int64, up float64, labels ...string) {
	b.tl = b.tl[:0]
	for i := 0; i < len(labels); i += 2 {
		b.tl = append(b.tl, label{labels[i], labels[i+1]})
	}
	b.up = up
	t0 := float64(b.g.cfg.StartMillis+offset) / 1000
	b.t = target{
		lo: int32(len(b.g.series)), glo: int32(len(b.g.groups)),
		offset: offset, start: t0 - up, load: 1,
	}
}

// end adds the series Prometheus itself records for every scrape and closes
// the target.
func (b *builder) end() {
	scraped := float64(len(b.g.series) - int(b.t.lo))
	b.constant("up", 1)
	b.gauge("scrape_duration_seconds", 0.002+scraped*b.r.between(2e-5, 2e-4), 0.2, 0, 1e-4, 10)
	b.constant("scrape_samples_scraped", scraped)
	b.constant("scrape_series_added", 0)
	b.t.hi = int32(len(b.g.series))
	b.t.ghi = int32(len(b.g.groups))
	b.g.targets = append(b.g.targets, b.t)
}

// add appends one series named name with labels kv (name, value pairs) and
// the target's labels, sorted by name as Prometheus writes them.
func (b *builder) add(name string, s series, kv ...string) {
	pairs := b.pairs[:0]
	for i := 0; i < len(kv); i += 2 {
		pairs = append(pairs, label{kv[i], kv[i+1]})
	}
	pairs = append(pairs, b.tl...)
	slices.SortFunc(pairs, func(x, y label) int { return strings.Compare(x.name, y.name) })
	b.pairs = pairs
	a := b.g.arena
	lo := len(a)
	a = append(a, name...)
	if len(pairs) > 0 {
		a = append(a, '{')
		for i, l := range pairs {
			if i > 0 {
				a = append(a, ',')
			}
			a = append(a, l.name...)
			a = append(a, '=', '"')
			a = appendEscaped(a, l.value)
			a = append(a, '"')
		}
		a = append(a, '}')
	}
	a = append(a, ' ')
	b.g.arena = a
	s.lo, s.hi = uint32(lo), uint32(len(a))
	s.part = uint16(hash(a[lo:]) % uint64(b.g.cfg.Partitions))
	b.g.series = append(b.g.series, s)
	if _, ok := b.names[name]; !ok {
		b.names[name] = struct{}{}
		b.g.names++
	}
}

// appendEscaped escapes a label value as the text format requires.
func appendEscaped(dst []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			dst = append(dst, '\\', '\\')
		case '"':
			dst = append(dst, '\\', '"')
		case '\n':
			dst = append(dst, '\\', 'n')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// hash is FNV-1a with a final avalanche, so that few partitions still get
// an even share of series.
func hash(p []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range p {
		h ^= uint64(c)
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

// counter adds a counter growing at about rate per second, scaled by the
// target's load, with ±30% noise per scrape; values are multiples of
// 1/scale (0: exact). It starts where the target's uptime has brought it.
func (b *builder) counter(name string, rate, scale float64, kv ...string) {
	b.add(name, series{kind: kindCounter, a: rate, b: 0.3, load: true, scale: scale,
		v: rate * b.up * b.r.between(0.7, 1.3)}, kv...)
}

// steady adds a counter that ignores the target's load and varies by
// ±noise per scrape (CPU seconds by mode, interrupts).
func (b *builder) steady(name string, rate, noise, scale float64, kv ...string) {
	b.add(name, series{kind: kindCounter, a: rate, b: noise, scale: scale,
		v: rate * b.up * b.r.between(0.9, 1.1)}, kv...)
}

// monotonic adds an ever-growing value that survives restarts of the
// target (offsets kept by a broker, database sizes), starting at v0.
func (b *builder) monotonic(name string, v0, rate, scale float64, kv ...string) {
	b.add(name, series{kind: kindMonotonic, a: rate, b: 0.3, load: true, scale: scale, v: v0}, kv...)
}

// gauge adds a mean-reverting random walk around level: each scrape moves
// it 10% of the way back to level plus a normal step of rel·level, kept
// within [lo, hi]; values are multiples of 1/scale (0: exact).
func (b *builder) gauge(name string, level, rel, scale, lo, hi float64, kv ...string) {
	v := min(max(level*(1+2*rel*b.r.norm()), lo), hi)
	b.add(name, series{kind: kindGauge, a: level, b: rel * level, scale: scale, min: lo, max: hi, v: v}, kv...)
}

// constant adds a series whose value never changes.
func (b *builder) constant(name string, v float64, kv ...string) {
	b.add(name, series{kind: kindConst, v: v}, kv...)
}

// startTime adds the target's start time in seconds, a multiple of 1/scale.
func (b *builder) startTime(name string, scale float64) {
	b.add(name, series{kind: kindStart, scale: scale})
}

// now adds the scrape time in seconds.
func (b *builder) now(name string) { b.add(name, series{kind: kindNow}) }

// Bucket bounds of Prometheus client libraries' default histogram.
var (
	bucketBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, math.Inf(1)}
	bucketLabels = []string{"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"}
)

// histogram adds name_bucket{le=...} for the default buckets, name_sum and
// name_count, observing a log-normal quantity (median, sigma) rate times a
// second.
func (b *builder) histogram(name string, rate, median, sigma float64, kv ...string) {
	gi := int32(len(b.g.groups))
	gr := group{rate: rate, mean: median * math.Exp(sigma*sigma/2), sigma: sigma,
		probs: make([]float64, len(bucketBounds)), cum: make([]float64, len(bucketBounds))}
	prev := 0.0
	n0 := math.Floor(rate * b.up * b.r.between(0.7, 1.3))
	for i, le := range bucketBounds {
		f := 1.0
		if !math.IsInf(le, 1) {
			f = phi((math.Log(le) - math.Log(median)) / sigma)
		}
		gr.probs[i] = f - prev
		prev = f
		gr.cum[i] = math.Floor(n0 * f)
	}
	gr.count = n0
	gr.sum = n0 * gr.mean
	b.g.groups = append(b.g.groups, gr)
	bkv := append(kv[:len(kv):len(kv)], "le", "")
	for i := range bucketBounds {
		bkv[len(bkv)-1] = bucketLabels[i]
		b.add(name+"_bucket", series{kind: kindHist, group: gi, member: uint8(i)}, bkv...)
	}
	b.add(name+"_sum", series{kind: kindHist, group: gi, member: memberSum}, kv...)
	b.add(name+"_count", series{kind: kindHist, group: gi, member: memberCount}, kv...)
}

// Quantiles of Go's go_gc_duration_seconds, and where each sits relative
// to the median.
var (
	summaryLabels = []string{"0", "0.25", "0.5", "0.75", "1"}
	summaryQuant  = []float64{0.35, 0.7, 1, 1.5, 6}
)

// summary adds name{quantile=...}, name_sum and name_count for a
// quantity with the given median observed rate times a second.
func (b *builder) summary(name string, rate, median float64, kv ...string) {
	gi := int32(len(b.g.groups))
	n0 := math.Floor(rate * b.up * b.r.between(0.7, 1.3))
	gr := group{rate: rate, mean: median * 1.3, med: median, quant: summaryQuant,
		cum: make([]float64, len(summaryQuant)), count: n0, sum: n0 * median * 1.3}
	for i, q := range summaryQuant {
		gr.cum[i] = math.Round(median*q*1e9) / 1e9
	}
	b.g.groups = append(b.g.groups, gr)
	qkv := append(kv[:len(kv):len(kv)], "quantile", "")
	for i := range summaryQuant {
		qkv[len(qkv)-1] = summaryLabels[i]
		b.add(name, series{kind: kindSummary, group: gi, member: uint8(i)}, qkv...)
	}
	b.add(name+"_sum", series{kind: kindSummary, group: gi, member: memberSum}, kv...)
	b.add(name+"_count", series{kind: kindSummary, group: gi, member: memberCount}, kv...)
}
