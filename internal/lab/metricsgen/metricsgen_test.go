package metricsgen

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sample is a parsed record.
type sample struct {
	name   string
	labels []label
	value  float64
	ts     int64
	prefix string // `name{labels} `: the series
}

func (s sample) label(name string) string {
	for _, l := range s.labels {
		if l.name == name {
			return l.value
		}
	}
	return ""
}

// parseLine is a strict, hand-written parser of one text-format sample line
// with a timestamp: name{l="v",...} value timestamp_ms.
func parseLine(line string) (sample, error) {
	var s sample
	i := 0
	isNameChar := func(c byte, first, colon bool) bool {
		return c == '_' || (colon && c == ':') || (c|0x20 >= 'a' && c|0x20 <= 'z') || (!first && c >= '0' && c <= '9')
	}
	for i < len(line) && isNameChar(line[i], i == 0, true) {
		i++
	}
	if i == 0 {
		return s, fmt.Errorf("no metric name")
	}
	s.name = line[:i]
	if i < len(line) && line[i] == '{' {
		i++
		for {
			j := i
			for j < len(line) && isNameChar(line[j], j == i, false) {
				j++
			}
			if j == i || j+1 >= len(line) || line[j] != '=' || line[j+1] != '"' {
				return s, fmt.Errorf("bad label at byte %d", i)
			}
			name := line[i:j]
			var v strings.Builder
			j += 2
			for ; j < len(line) && line[j] != '"'; j++ {
				c := line[j]
				if c == '\\' {
					j++
					if j == len(line) {
						return s, fmt.Errorf("unterminated escape")
					}
					switch line[j] {
					case '\\', '"':
						c = line[j]
					case 'n':
						c = '\n'
					default:
						return s, fmt.Errorf("bad escape \\%c", line[j])
					}
				} else if c == '\n' {
					return s, fmt.Errorf("newline in label value")
				}
				v.WriteByte(c)
			}
			if j == len(line) {
				return s, fmt.Errorf("unterminated label value")
			}
			s.labels = append(s.labels, label{name, v.String()})
			i = j + 1
			if i < len(line) && line[i] == ',' {
				i++
				continue
			}
			if i < len(line) && line[i] == '}' {
				i++
				break
			}
			return s, fmt.Errorf("want , or } at byte %d", i)
		}
	}
	if i >= len(line) || line[i] != ' ' {
		return s, fmt.Errorf("want a space after the series at byte %d", i)
	}
	s.prefix = line[:i+1]
	rest := line[i+1:]
	sp := strings.IndexByte(rest, ' ')
	if sp < 0 {
		return s, fmt.Errorf("no timestamp")
	}
	v, err := strconv.ParseFloat(rest[:sp], 64)
	if err != nil {
		return s, err
	}
	s.value = v
	tsText := rest[sp+1:]
	if tsText == "" || strings.TrimLeft(tsText, "0123456789") != "" {
		return s, fmt.Errorf("bad timestamp %q", tsText)
	}
	if s.ts, err = strconv.ParseInt(tsText, 10, 64); err != nil {
		return s, err
	}
	return s, nil
}

func mustNew(t testing.TB, cfg Config) *Generator {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// records returns the next n records of g, parsed.
func records(t testing.TB, g *Generator, n int) []sample {
	t.Helper()
	out := make([]sample, n)
	var buf []byte
	for i := range out {
		buf = g.AppendRecord(buf[:0])
		s, err := parseLine(string(buf))
		if err != nil {
			t.Fatalf("record %d %q: %v", i, buf, err)
		}
		out[i] = s
	}
	return out
}

func TestDeterministic(t *testing.T) {
	run := func(cfg Config) (lines, msgs []byte) {
		g := mustNew(t, cfg)
		var buf []byte
		for range 100_000 {
			lines = g.AppendRecord(lines)
			lines = append(lines, '\n')
		}
		var m [][]byte
		for range 300 {
			m = g.NextMessage(m)
			for _, r := range m {
				buf = append(append(buf, r...), '\n')
			}
			buf = append(buf, '\n')
		}
		return lines, buf
	}
	l1, m1 := run(Config{Seed: 42})
	l2, m2 := run(Config{Seed: 42})
	if !bytes.Equal(l1, l2) || !bytes.Equal(m1, m2) {
		t.Fatal("same seed and config gave different output")
	}
	l3, _ := run(Config{Seed: 43})
	if bytes.Equal(l1, l3) {
		t.Fatal("seeds 42 and 43 gave the same output")
	}
	d1, _ := run(Config{})
	d2, _ := run(DefaultConfig())
	if bytes.Equal(d1, d2) {
		t.Fatal("seed 0 and the default seed 1 gave the same output")
	}
}

func TestFleet(t *testing.T) {
	g := mustNew(t, Config{Seed: 1})
	st := g.Stats()
	if st.Series < 1e4 || st.Series > 1e5 {
		t.Errorf("default fleet has %d series, want 10^4..10^5", st.Series)
	}
	jobs := map[string]int{}
	var round int64
	seen := map[string]bool{}
	for _, s := range records(t, g, st.Series) {
		if seen[s.prefix] {
			t.Fatalf("series %q twice in one round", s.prefix)
		}
		seen[s.prefix] = true
		jobs[s.label("job")]++
	}
	round = g.Stats().Bytes
	t.Logf("default fleet: %d hosts, %d targets, %d series, %d metric names; one round = %d samples, %.1f MB, %.1f bytes a line; series per job %v",
		st.Hosts, st.Targets, st.Series, st.Families, st.Series, float64(round)/1e6, float64(round)/float64(st.Series), jobs)
	for _, j := range []string{"node", "api", "nginx", "postgres", "kafka"} {
		if jobs[j] == 0 {
			t.Errorf("no series of job %q", j)
		}
	}
}

func TestLineFormat(t *testing.T) {
	cfg := Config{Seed: 7, Hosts: 20}
	g := mustNew(t, cfg)
	n := g.Stats().Series
	start := g.Config().StartMillis
	interval := g.Config().ScrapeInterval.Milliseconds()
	last := map[string]int64{}
	for i, s := range records(t, g, 3*n) {
		round := int64(i / n)
		if s.ts < start+round*interval || s.ts >= start+(round+1)*interval+10 {
			t.Fatalf("record %d of round %d: timestamp %d outside the round", i, round, s.ts)
		}
		if prev, ok := last[s.prefix]; ok && s.ts-prev < interval-10 {
			t.Fatalf("%s: timestamps %d then %d", s.prefix, prev, s.ts)
		}
		last[s.prefix] = s.ts
		if math.IsNaN(s.value) || math.IsInf(s.value, 0) {
			t.Fatalf("%s: value %v", s.prefix, s.value)
		}
		if s.label("instance") == "" || s.label("job") == "" || s.label("region") == "" || s.label("zone") == "" {
			t.Fatalf("%s: missing target labels", s.prefix)
		}
		if !slices.IsSortedFunc(s.labels, func(a, b label) int { return strings.Compare(a.name, b.name) }) {
			t.Fatalf("%s: labels not sorted", s.prefix)
		}
		for j := 1; j < len(s.labels); j++ {
			if s.labels[j].name == s.labels[j-1].name {
				t.Fatalf("%s: label %s twice", s.prefix, s.labels[j].name)
			}
		}
	}
	if len(last) != n {
		t.Fatalf("%d distinct series over 3 rounds, want %d", len(last), n)
	}
}

func TestParseLine(t *testing.T) {
	for _, bad := range []string{"", " 1 2", "a{b=\"c\"} 1", "a{b=c} 1 2", "a 1 2 ", "a{b=\"c\",} 1 2", "a 1 -2", "a x 2", "a{b=\"\\q\"} 1 2"} {
		if _, err := parseLine(bad); err == nil {
			t.Errorf("parseLine(%q) accepted it", bad)
		}
	}
	s, err := parseLine(`a_b:c{le="+Inf",x="q\"\\"} 1.5e+06 17`)
	if err != nil || s.name != "a_b:c" || s.label("x") != `q"\` || s.value != 1.5e6 || s.ts != 17 {
		t.Errorf("got %+v, %v", s, err)
	}
}

func TestHistograms(t *testing.T) {
	g := mustNew(t, Config{Seed: 3, Hosts: 15, RestartProbability: 0.01})
	n := g.Stats().Series
	type key struct {
		series string // the histogram: name and labels without le
		ts     int64
	}
	type hist struct {
		les    []float64
		counts []float64
		count  float64
		has    int // bits: 1 _count, 2 _sum
	}
	hists := map[key]*hist{}
	quant := map[key][]float64{}
	strip := func(s sample, base, drop string) key {
		var b strings.Builder
		b.WriteString(base)
		for _, l := range s.labels {
			if l.name != drop {
				fmt.Fprintf(&b, ",%s=%q", l.name, l.value)
			}
		}
		return key{b.String(), s.ts}
	}
	get := func(k key) *hist {
		if hists[k] == nil {
			hists[k] = &hist{}
		}
		return hists[k]
	}
	for _, s := range records(t, g, 10*n) {
		switch {
		case strings.HasSuffix(s.name, "_bucket"):
			h := get(strip(s, strings.TrimSuffix(s.name, "_bucket"), "le"))
			le, err := strconv.ParseFloat(s.label("le"), 64)
			if err != nil {
				t.Fatalf("%s: le: %v", s.prefix, err)
			}
			h.les = append(h.les, le)
			h.counts = append(h.counts, s.value)
		case s.name == "http_request_duration_seconds_count":
			h := get(strip(s, "http_request_duration_seconds", ""))
			h.count = s.value
			h.has |= 1
		case s.name == "http_request_duration_seconds_sum":
			get(strip(s, "http_request_duration_seconds", "")).has |= 2
			if s.value < 0 {
				t.Fatalf("%s: negative sum", s.prefix)
			}
		case s.name == "go_gc_duration_seconds":
			k := strip(s, s.name, "quantile")
			quant[k] = append(quant[k], s.value)
		}
	}
	if len(hists) == 0 || len(quant) == 0 {
		t.Fatal("no histograms or no summaries")
	}
	for k, h := range hists {
		if h.has != 3 || len(h.les) != len(bucketBounds) {
			t.Fatalf("%v: %d buckets, _count/_sum bits %b", k, len(h.les), h.has)
		}
		if !slices.IsSorted(h.les) || !math.IsInf(h.les[len(h.les)-1], 1) {
			t.Fatalf("%v: bucket bounds %v", k, h.les)
		}
		if !slices.IsSorted(h.counts) {
			t.Fatalf("%v: buckets not cumulative: %v", k, h.counts)
		}
		if inf := h.counts[len(h.counts)-1]; inf != h.count {
			t.Fatalf("%v: +Inf bucket %v != _count %v", k, inf, h.count)
		}
		for _, c := range h.counts {
			if c != math.Floor(c) || c < 0 {
				t.Fatalf("%v: bucket count %v", k, c)
			}
		}
	}
	for k, q := range quant {
		if len(q) != len(summaryQuant) || !slices.IsSorted(q) {
			t.Fatalf("%v: quantiles %v", k, q)
		}
	}
	t.Logf("%d histogram scrapes and %d summary scrapes consistent", len(hists), len(quant))
}

// TestCounters checks that every counter (and histogram or summary member)
// only grows, except when its target restarted, which
// process_start_time_seconds or node_boot_time_seconds shows.
func TestCounters(t *testing.T) {
	g := mustNew(t, Config{Seed: 5, Hosts: 30, RestartProbability: 0.02})
	index := map[string]int{} // series prefix -> index in g.series
	for i := range g.series {
		s := &g.series[i]
		index[string(g.arena[s.lo:s.hi])] = i
	}
	targetOf := make([]int, len(g.series))
	for ti, tg := range g.targets {
		for i := tg.lo; i < tg.hi; i++ {
			targetOf[i] = ti
		}
	}
	const rounds = 40
	n := len(g.series)
	prev := make([]float64, n)
	seen := make([]bool, n)
	type tkey struct {
		target int
		ts     int64
	}
	decreased := map[tkey]bool{}
	started := map[tkey]bool{}              // the target's start time changed at this scrape
	startAt := map[int]float64{}            // by series
	prevTS := make([]int64, len(g.targets)) // the target's previous scrape
	curTS := make([]int64, len(g.targets))
	var decreases int
	for _, s := range records(t, g, rounds*n) {
		i, ok := index[s.prefix]
		if !ok {
			t.Fatalf("unknown series %q", s.prefix)
		}
		ti := targetOf[i]
		if s.ts != curTS[ti] {
			prevTS[ti], curTS[ti] = curTS[ti], s.ts
		}
		k := g.series[i].kind
		if k == kindStart {
			if v, ok := startAt[i]; ok && v != s.value {
				started[tkey{ti, s.ts}] = true
				if s.value < float64(prevTS[ti])/1000-1 || s.value > float64(s.ts)/1000 {
					t.Fatalf("%s: start time %f not within the last interval (%d, %d]", s.prefix, s.value, prevTS[ti], s.ts)
				}
			}
			startAt[i] = s.value
		}
		growing := k == kindCounter || k == kindMonotonic || (k == kindHist) ||
			(k == kindSummary && g.series[i].member >= memberSum)
		if growing && seen[i] && s.value < prev[i] {
			if k == kindMonotonic {
				t.Fatalf("%s: %v after %v, and it survives restarts", s.prefix, s.value, prev[i])
			}
			decreased[tkey{ti, s.ts}] = true
			decreases++
		}
		prev[i], seen[i] = s.value, true
	}
	for k := range decreased {
		if !started[k] {
			t.Fatalf("target %d: counters decreased at %d without a restart", k.target, k.ts)
		}
	}
	st := g.Stats()
	if st.Restarts == 0 || len(decreased) == 0 || len(started) != int(st.Restarts) {
		t.Fatalf("%d restarts, %d targets seen restarting, %d scrapes with counter resets", st.Restarts, len(started), len(decreased))
	}
	t.Logf("%d restarts over %d rounds of %d targets; %d counter resets, all at restarts", st.Restarts, rounds, len(g.targets), decreases)
}

type sizeSummary struct {
	n                       int
	min, p10, p50, p90, p99 int
	p999, max               int
	mean                    float64
}

func (s sizeSummary) String() string {
	return fmt.Sprintf("n=%d min=%d p10=%d p50=%d mean=%.0f p90=%d p99=%d p99.9=%d max=%d",
		s.n, s.min, s.p10, s.p50, s.mean, s.p90, s.p99, s.p999, s.max)
}

func messageSizes(t *testing.T, g *Generator, n int) sizeSummary {
	sizes := make([]int, n)
	var msg [][]byte
	var total float64
	for i := range sizes {
		msg = g.NextMessage(msg)
		for _, r := range msg {
			sizes[i] += len(r)
		}
		total += float64(sizes[i])
	}
	slices.Sort(sizes)
	q := func(p float64) int { return sizes[int(p*float64(n-1))] }
	return sizeSummary{n: n, min: sizes[0], p10: q(0.1), p50: q(0.5), p90: q(0.9), p99: q(0.99),
		p999: q(0.999), max: sizes[n-1], mean: total / float64(n)}
}

func TestMessageSizes(t *testing.T) {
	for _, mean := range []int{10_000, DefaultMeanMessageBytes, 25_000} {
		g := mustNew(t, Config{Seed: 11, MeanMessageBytes: mean})
		s := messageSizes(t, g, 2000)
		d := g.sizes
		t.Logf("mean %d: %v", mean, s)
		t.Logf("    model: log-normal mu=%.4f sigma=%.2f truncated to [%d, %d]: median %.0f, p1 %.0f, p99 %.0f, p99.9 %.0f",
			d.mu, d.sigma, DefaultMinMessageBytes, DefaultMaxMessageBytes, d.quantile(0.5), d.quantile(0.01), d.quantile(0.99), d.quantile(0.999))
		if s.mean < 0.9*float64(mean) || s.mean > 1.1*float64(mean) || s.mean < 9_000 || s.mean > 27_500 {
			t.Errorf("mean %.0f, want %d ± 10%%", s.mean, mean)
		}
		if s.min < 1000 || s.max > 500_000 {
			t.Errorf("sizes range over [%d, %d], want within [1000, 500000]", s.min, s.max)
		}
		if float64(s.p50) >= s.mean {
			t.Errorf("median %d >= mean %.0f: not right-skewed", s.p50, s.mean)
		}
		if s.p99 < 4*s.p50 {
			t.Errorf("p99 %d < 4 × median %d: tail too light", s.p99, s.p50)
		}
	}
}

func TestMessagesMixSeries(t *testing.T) {
	g := mustNew(t, Config{Seed: 13})
	var msg [][]byte
	var big, names, instances, sameNeighbour, pairs int
	for range 500 {
		msg = g.NextMessage(msg)
		size := 0
		nm, in := map[string]bool{}, map[string]bool{}
		var prevName string
		for i, r := range msg {
			if bytes.IndexByte(r, '\n') >= 0 {
				t.Fatalf("newline in record %q", r)
			}
			s, err := parseLine(string(r))
			if err != nil {
				t.Fatalf("record %q: %v", r, err)
			}
			size += len(r)
			nm[s.name], in[s.label("instance")] = true, true
			if i > 0 {
				pairs++
				if s.name == prevName {
					sameNeighbour++
				}
			}
			prevName = s.name
		}
		if size < 16<<10 {
			continue
		}
		big++
		names += len(nm)
		instances += len(in)
		if len(nm) < 10 || len(in) < 5 {
			t.Fatalf("message of %d bytes: %d metric names, %d instances", size, len(nm), len(in))
		}
	}
	if big == 0 {
		t.Fatal("no message of 16 KiB or more")
	}
	t.Logf("%d messages >= 16 KiB: on average %d metric names and %d instances each; %.1f%% of neighbouring records share a metric name",
		big, names/big, instances/big, 100*float64(sameNeighbour)/float64(pairs))
}

// TestMessagesArePartitions checks that the messages cut each partition's
// share of the record stream into consecutive pieces, losing nothing.
func TestMessagesArePartitions(t *testing.T) {
	cfg := Config{Seed: 17, Hosts: 40, Partitions: 8}
	a, b := mustNew(t, cfg), mustNew(t, cfg)
	got := make([][]string, cfg.Partitions)
	part := func(r []byte) int {
		s, err := parseLine(string(r))
		if err != nil {
			t.Fatal(err)
		}
		return int(hash([]byte(s.prefix)) % uint64(cfg.Partitions))
	}
	var msg [][]byte
	for range 300 {
		msg = a.NextMessage(msg)
		p := part(msg[0])
		for _, r := range msg {
			if part(r) != p {
				t.Fatal("a message mixes partitions")
			}
			got[p] = append(got[p], string(r))
		}
	}
	want := make([][]string, cfg.Partitions)
	var buf []byte
	for range a.Stats().Samples {
		buf = b.AppendRecord(buf[:0])
		p := part(buf)
		want[p] = append(want[p], string(buf))
	}
	for p := range got {
		if len(got[p]) > len(want[p]) || !slices.Equal(got[p], want[p][:len(got[p])]) {
			t.Fatalf("partition %d: messages are not its records in stream order", p)
		}
	}
}

func TestMaxMessageAge(t *testing.T) {
	g := mustNew(t, Config{Seed: 19, Hosts: 2, MaxMessageAge: time.Minute})
	var msg [][]byte
	small := 0
	for range 200 {
		msg = g.NextMessage(msg)
		first, _ := parseLine(string(msg[0]))
		last, _ := parseLine(string(msg[len(msg)-1]))
		if last.ts-first.ts >= time.Minute.Milliseconds() {
			t.Fatalf("message spans %d ms", last.ts-first.ts)
		}
		size := 0
		for _, r := range msg {
			size += len(r)
		}
		if size < DefaultMinMessageBytes {
			small++
		}
	}
	if small == 0 {
		t.Error("a two-host fleet with a one-minute limit never cut a message short")
	}
}

func TestAllocs(t *testing.T) {
	g := mustNew(t, Config{Seed: 23})
	buf := make([]byte, 0, 4096)
	if a := testing.AllocsPerRun(10_000, func() { buf = g.AppendRecord(buf[:0]) }); a != 0 {
		t.Errorf("AppendRecord: %v allocations a call", a)
	}
	var msg [][]byte
	for range 3000 {
		msg = g.NextMessage(msg)
	}
	if a := testing.AllocsPerRun(1000, func() { msg = g.NextMessage(msg) }); a > 0.05 {
		t.Errorf("NextMessage: %v allocations a call in steady state", a)
	}
}

func TestConfig(t *testing.T) {
	g := mustNew(t, Config{})
	c := g.Config()
	d := DefaultConfig()
	d.Seed = 0
	if c != d {
		t.Errorf("zero Config became %+v, want %+v", c, d)
	}
	for _, bad := range []Config{
		{Hosts: -1}, {Hosts: 10_001}, {MeanMessageBytes: 1 << 10}, {MeanMessageBytes: 500 << 10},
		{MinMessageBytes: 5000, MaxMessageBytes: 4000}, {MessageSigma: -1}, {MessageSigma: 4},
		{Partitions: 5000}, {ScrapeInterval: time.Microsecond}, {ScrapeInterval: 1500 * time.Microsecond},
		{StartMillis: -5}, {RestartProbability: 2},
	} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%+v) accepted it", bad)
		}
	}
	if _, err := New(Config{Hosts: 1, RestartProbability: -1, MaxMessageAge: -1}); err != nil {
		t.Errorf("negative RestartProbability and MaxMessageAge should disable them: %v", err)
	}
}

func TestSizeDist(t *testing.T) {
	for _, c := range []struct{ mean, lo, hi, sigma float64 }{
		{16384, 2048, 409600, 1}, {10000, 2048, 409600, 0.5}, {25000, 2048, 409600, 1.5}, {3000, 2048, 409600, 1},
	} {
		d := newSizeDist(c.mean, c.lo, c.hi, c.sigma)
		if m := truncMean(d.mu, d.sigma, c.lo, c.hi); math.Abs(m-c.mean) > 1e-6*c.mean {
			t.Errorf("%+v: truncated mean %v", c, m)
		}
		// Numerical mean of the quantile function.
		var sum float64
		const steps = 200_000
		for i := range steps {
			sum += d.quantile((float64(i) + 0.5) / steps)
		}
		if m := sum / steps; math.Abs(m-c.mean) > 0.01*c.mean {
			t.Errorf("%+v: mean of draws %v", c, m)
		}
		if d.quantile(0) < c.lo-1e-6 || d.quantile(1) > c.hi+1e-6 {
			t.Errorf("%+v: support [%v, %v]", c, d.quantile(0), d.quantile(1))
		}
	}
}
