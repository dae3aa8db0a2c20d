package chart

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/lab/bench"
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
