// Package chart draws the benchmark charts of `sluice bench` as plain SVG
// (no dependency, diffable in git): latency and throughput of the
// request-response olympics, upload MB/s by chunk size, WAN goodput by
// mode. Each function takes finished results and only draws.
package chart

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/bench"
	"github.com/sluicehq/sluice/internal/defaults"
)

// RR draws two charts in plain SVG: p50/p99/p99.9 (medians, log scale)
// for every row, and throughput against requests in flight for the
// closed-loop rows, one line per protocol.
func RR(rs bench.Results) string {
	var b strings.Builder
	const barH, left = 14, 230
	const w = rrWidth
	rows := rs.Rows
	h1 := 60 + len(rows)*(3*barH+8)
	h2 := 380
	hasClosed := slices.ContainsFunc(rows, func(r *bench.Row) bool { return r.Params["mode"] == "closed" })
	if !hasClosed {
		h2 = -40 // no second chart
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h1+h2+40)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="10" y="20" font-size="15">Latency per protocol (median of reps; log scale, µs): p50, p99, p99.9</text>`+"\n")
	// Log axis from 10 µs to the largest p99.9.
	hi := 1000.0
	for _, r := range rows {
		hi = max(hi, r.Stat("p999_us").Median)
	}
	lo := 10.0
	x := func(v float64) float64 {
		v = min(max(v, lo), hi)
		return left + (w-left-30)*(log10(v)-log10(lo))/(log10(hi)-log10(lo))
	}
	for d := lo; d <= hi*1.0001; d *= 10 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="30" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" fill="#555">%s</text>`+"\n", x(d), x(d), h1-10, x(d)+2, h1, usLabel(d))
	}
	colors := []string{"#4c78a8", "#f58518", "#e45756"}
	for i, r := range rows {
		y := 40 + i*(3*barH+8)
		fmt.Fprintf(&b, `<text x="5" y="%d">%s</text>`+"\n", y+2*barH, esc(r.Name))
		for j, m := range []string{"p50_us", "p99_us", "p999_us"} {
			v := r.Stat(m).Median
			if v != v {
				continue
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/><text x="%.1f" y="%d" font-size="10">%.0f</text>`+"\n",
				left, y+j*barH, x(v)-left, barH-2, colors[j], x(v)+3, y+j*barH+barH-4, v)
		}
	}
	if !hasClosed {
		b.WriteString("</svg>\n")
		return b.String()
	}
	rrThroughput(&b, rows, h1, h2)
	b.WriteString("</svg>\n")
	return b.String()
}

func usLabel(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.0f s", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.0f ms", us/1e3)
	}
	return fmt.Sprintf("%.0f µs", us)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func log10(v float64) float64 { return math.Log10(v) }

// rrWidth is the width of the RR charts.
const rrWidth = 900

// rrThroughput draws requests/s against requests in flight for the
// closed-loop rows, one line per protocol, below the latency chart
// (h1 high); h2 is its own height.
func rrThroughput(b *strings.Builder, rows []*bench.Row, h1, h2 int) {
	const w = rrWidth
	// Throughput against in flight.
	type pt struct{ n, rps float64 }
	lines := map[string][]pt{}
	var names []string
	maxRPS, maxN := 1.0, 1.0
	for _, r := range rows {
		if r.Params["mode"] != "closed" {
			continue
		}
		p := fmt.Sprint(r.Params["protocol"])
		if _, ok := lines[p]; !ok {
			names = append(names, p)
		}
		n := float64(r.Params["inflight"].(int))
		v := r.Stat("rps").Median
		lines[p] = append(lines[p], pt{n, v})
		maxRPS, maxN = max(maxRPS, v), max(maxN, n)
	}
	top := h1 + 40
	fmt.Fprintf(b, `<text x="10" y="%d" font-size="15">Closed loop: requests/s (median) against requests in flight (log scale), one connection</text>`+"\n", top)
	px := func(n float64) float64 { return 80 + (w-300)*log10(n)/max(log10(maxN), 1) }
	py := func(v float64) float64 { return float64(top+h2-40) - float64(h2-80)*v/maxRPS }
	fmt.Fprintf(b, `<line x1="80" y1="%.1f" x2="%d" y2="%.1f" stroke="#333"/><line x1="80" y1="%d" x2="80" y2="%.1f" stroke="#333"/>`+"\n", py(0), w-220, py(0), top+20, py(0))
	for k := 0; k <= 4; k++ {
		v := maxRPS * float64(k) / 4
		fmt.Fprintf(b, `<text x="5" y="%.1f" fill="#555">%.0fk/s</text>`+"\n", py(v)+4, v/1000)
	}
	for n := 1.0; n <= maxN; n *= 4 {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#555">%.0f</text>`+"\n", px(n)-4, py(0)+15, n)
	}
	palette := []string{"#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d"}
	for i, p := range names {
		pts := lines[p]
		slices.SortFunc(pts, func(a, b pt) int { return int(a.n - b.n) })
		var poly []string
		for _, q := range pts {
			poly = append(poly, fmt.Sprintf("%.1f,%.1f", px(q.n), py(q.rps)))
		}
		c := palette[i%len(palette)]
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c, strings.Join(poly, " "))
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", w-200, top+30+i*18, c, w-182, top+40+i*18, esc(p))
	}
}

// UploadPoint is one cell of an upload sweep on the chart: a transport
// and source (one line each; a Series starting "seed" is drawn as a
// reference, dotted) at one chunk size.
type UploadPoint struct {
	Transport, Source string
	Chunk             int // bytes, > 0
	MBps              float64
}

// Upload draws MB/s (log scale) by chunk size (log2), one line per
// transport and source, for a sweep over files of size bytes.
func Upload(rs []UploadPoint, size int64) []byte {
	const w, h, l, r, t, b = 760, 420, 70, 150, 30, 50
	minC, maxC, maxY := 1<<30, 1, 1.0
	for _, x := range rs {
		minC, maxC, maxY = min(minC, x.Chunk), max(maxC, x.Chunk), max(maxY, x.MBps)
	}
	lg := func(v float64) float64 {
		n := 0.0
		for v >= 2 {
			v /= 2
			n++
		}
		return n + (v - 1)
	}
	top := 1.0
	for top < maxY {
		top *= 10
	}
	px := func(c int) float64 {
		if maxC == minC {
			return l
		}
		return l + (lg(float64(c))-lg(float64(minC)))/(lg(float64(maxC))-lg(float64(minC)))*(w-l-r)
	}
	py := func(v float64) float64 {
		if v < 1 {
			v = 1
		}
		d := 0.0
		for x := v; x >= 10; x /= 10 {
			d++
		}
		fr := d + (v/pow10(d)-1)/9
		lt := 0.0
		for x := top; x > 1; x /= 10 {
			lt++
		}
		return float64(h-b) - fr/lt*float64(h-b-t)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", w, h)
	fmt.Fprintf(&sb, `<text x="%d" y="18" font-size="13">sluice bench upload: %s file over loopback, MB/s (log) by chunk size</text>`+"\n", l, defaults.HumanSize(size))
	for v := 1.0; v <= top; v *= 10 {
		y := py(v)
		fmt.Fprintf(&sb, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n", l, w-r, y, y, l-6, y+4, v)
	}
	for c := minC; c <= maxC; c *= 4 {
		x := px(c)
		fmt.Fprintf(&sb, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, x, t, h-b, x, h-b+16, defaults.FormatSize(int64(c)))
	}
	var keys []string
	lines := map[string][]UploadPoint{}
	for _, x := range rs {
		k := x.Transport + " " + x.Source
		if lines[k] == nil {
			keys = append(keys, k)
		}
		lines[k] = append(lines[k], x)
	}
	for i, k := range keys {
		var pts []string
		for _, x := range lines[k] {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(x.Chunk), py(x.MBps)))
		}
		col, dash := uploadStyle(i, k)
		fmt.Fprintf(&sb, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", col, dash, strings.Join(pts, " "))
		fmt.Fprintf(&sb, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/><text x="%d" y="%d">%s</text>`+"\n", w-r+10, w-r+30, t+10+i*16, t+10+i*16, col, dash, w-r+34, t+14+i*16, k)
	}
	sb.WriteString("</svg>\n")
	return []byte(sb.String())
}

// uploadStyle is the colour and dash of line i, key k: disk dashed, the
// seed's references dotted in black and grey.
func uploadStyle(i int, k string) (col, dash string) {
	colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}
	col = colors[i%len(colors)]
	if strings.HasSuffix(k, "disk") {
		dash = ` stroke-dasharray="5,3"`
	}
	if strings.HasPrefix(k, "seed") {
		col, dash = "#000", ` stroke-dasharray="1,3"`
		if strings.Contains(k, "field") {
			col = "#888"
		}
	}
	return col, dash
}

func pow10(d float64) float64 {
	v := 1.0
	for ; d > 0; d-- {
		v *= 10
	}
	return v
}

// WAN draws goodput per mode, one group of bars per scenario, on a
// log scale (sync and compressed async differ by orders of magnitude).
func WAN(w io.Writer, title string, rs []bench.WANResult) error {
	var scenarios, modes []string
	seen := map[string]bool{}
	for _, r := range rs {
		if !seen["s"+r.Scenario] {
			seen["s"+r.Scenario] = true
			scenarios = append(scenarios, r.Scenario)
		}
		if !seen["m"+r.Mode] {
			seen["m"+r.Mode] = true
			modes = append(modes, r.Mode)
		}
	}
	const (
		width, height          = 760, 380
		left, right, top, bott = 70, 20, 50, 70
	)
	colors := []string{"#9e9e9e", "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2"}
	maxV := 1.0
	for _, r := range rs {
		maxV = math.Max(maxV, r.GoodputMBps())
	}
	top10 := math.Pow(10, math.Ceil(math.Log10(maxV)))
	minV := 0.1
	y := func(v float64) float64 {
		v = math.Max(v, minV)
		return top + (height-top-bott)*(1-(math.Log10(v)-math.Log10(minV))/(math.Log10(top10)-math.Log10(minV)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	for v := minV; v <= top10*1.001; v *= 10 {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n",
			left, width-right, y(v), y(v), left-6, y(v)+4, v)
	}
	fmt.Fprintf(&b, `<text transform="translate(18,%d) rotate(-90)" text-anchor="middle">goodput, MB/s (log)</text>`+"\n", (height+top-bott)/2)
	groupW := float64(width-left-right) / float64(len(scenarios))
	barW := groupW * 0.8 / float64(len(modes))
	for si, sc := range scenarios {
		gx := float64(left) + groupW*float64(si) + groupW*0.1
		for mi, mode := range modes {
			for _, r := range rs {
				if r.Scenario != sc || r.Mode != mode {
					continue
				}
				x := gx + barW*float64(mi)
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.1f MB/s</title></rect>`+"\n",
					x, y(r.GoodputMBps()), barW-2, y(minV)-y(r.GoodputMBps()), colors[mi%len(colors)], sc, mode, r.GoodputMBps())
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%.3g</text>`+"\n",
					x+barW/2-1, y(r.GoodputMBps())-4, r.GoodputMBps())
			}
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" font-weight="bold">%s</text>`+"\n", gx+groupW*0.4, height-bott+18, html.EscapeString(sc))
	}
	for mi, mode := range modes {
		x := left + mi*160
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			x, height-24, colors[mi%len(colors)], x+16, height-14, html.EscapeString(mode))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
