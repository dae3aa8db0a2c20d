package bench

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// PrintWANTable writes one scenario's results as a Markdown table; speedup
// is against the first "sync" row.
func PrintWANTable(w io.Writer, rs []WANResult) {
	fmt.Fprintln(w, "| mode | connections | window | goodput MB/s | wire MB/s | link use | compression | speedup vs sync | time s | CPU s agent | CPU s sink | CPU s link |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		speed, util := "", ""
		if sg := syncGoodput(rs); !math.IsNaN(sg) {
			// Every mode sends the same bytes, so the ratio of goodputs
			// is the ratio of times.
			speed = fmt.Sprintf("%.1f×", r.GoodputMBps()/sg)
		}
		if r.RateBits > 0 {
			util = fmt.Sprintf("%.0f%%", 100*r.Utilization())
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.1f | %.1f | %s | %.2f× | %s | %.1f | %.1f | %.1f | %.1f |\n",
			r.Mode, r.Conns, r.Window, r.GoodputMBps(), r.WireMBps(), util, r.Compression(), speed,
			r.Elapsed.Seconds(), r.AgentCPU.Seconds(), r.SinkCPU.Seconds(), r.LinkCPU.Seconds())
	}
}

func syncGoodput(rs []WANResult) float64 {
	for _, r := range rs {
		if r.Mode == "sync" {
			return r.GoodputMBps()
		}
	}
	return math.NaN()
}

// WriteWANCSV writes every result as CSV with derived columns.
func WriteWANCSV(w io.Writer, rs []WANResult) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"scenario", "mode", "connections", "window", "link_mbit", "rtt_ms", "seconds",
		"goodput_mb_s", "wire_mb_s", "link_utilization", "compression", "raw_bytes", "payload_bytes",
		"link_bytes", "messages", "resent", "cpu_agent_s", "cpu_sink_s", "cpu_link_s", "rep"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	for _, r := range rs {
		cw.Write([]string{r.Scenario, r.Mode, strconv.Itoa(r.Conns), r.Window, f(float64(r.RateBits) / 1e6),
			f(float64(r.RTT) / 1e6), f(r.Elapsed.Seconds()), f(r.GoodputMBps()), f(r.WireMBps()), f(r.Utilization()),
			f(r.Compression()), strconv.FormatInt(r.RawBytes, 10), strconv.FormatInt(r.PayloadBytes, 10),
			strconv.FormatInt(r.LinkBytes, 10), strconv.FormatInt(r.Messages, 10), strconv.FormatUint(r.Resent, 10),
			f(r.AgentCPU.Seconds()), f(r.SinkCPU.Seconds()), f(r.LinkCPU.Seconds()), strconv.Itoa(r.Rep)})
	}
	cw.Flush()
	return cw.Error()
}

// Metrics are the numbers of one run, for the shared JSON report.
func (r WANResult) Metrics() Metrics {
	return Metrics{"goodput_mb_per_sec": r.GoodputMBps(), "wire_mb_per_sec": r.WireMBps(), "link_utilization": r.Utilization(),
		"compression_ratio": r.Compression(), "elapsed_s": r.Elapsed.Seconds(), "raw_bytes": float64(r.RawBytes),
		"payload_bytes": float64(r.PayloadBytes), "link_bytes": float64(r.LinkBytes), "messages": float64(r.Messages),
		"resent": float64(r.Resent), "cpu_agent_s": r.AgentCPU.Seconds(), "cpu_sink_s": r.SinkCPU.Seconds(),
		"cpu_link_s": r.LinkCPU.Seconds()}
}

// WANResults groups runs into the shared report's rows, one per scenario
// and mode, with each run's goodput over the same scenario's and rep's
// sync run as speedup_vs_sync.
func WANResults(rs []WANResult) Results {
	var out Results
	for _, r := range rs {
		m := r.Metrics()
		for _, s := range rs {
			if s.Mode == "sync" && s.Scenario == r.Scenario && s.Rep == r.Rep {
				m["speedup_vs_sync"] = r.GoodputMBps() / s.GoodputMBps()
			}
		}
		out.Add(r.Scenario+" / "+r.Mode, map[string]any{"scenario": r.Scenario, "mode": r.Mode, "connections": r.Conns,
			"window": r.Window, "link_bits_per_sec": r.RateBits, "rtt_s": r.RTT.Seconds()}, m)
	}
	return out
}

// PrintWANRepsTable is PrintWANTable over several reps of one scenario:
// groups holds each mode's runs; cells are medians, goodput and speedup
// with their (min–max).
func PrintWANRepsTable(w io.Writer, groups [][]WANResult) {
	var all []WANResult
	for _, g := range groups {
		all = append(all, g...)
	}
	res := WANResults(all)
	fmt.Fprintln(w, "| mode | connections | window | goodput MB/s | wire MB/s | link use | compression | speedup vs sync | time s | CPU s agent | CPU s sink | CPU s link |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, g := range groups {
		if len(g) == 0 {
			continue
		}
		r0 := g[0]
		row := res.Row(r0.Scenario + " / " + r0.Mode)
		util, speed := "", ""
		if r0.RateBits > 0 {
			s := row.Stat("link_utilization")
			s.Median, s.Min, s.Max = 100*s.Median, 100*s.Min, 100*s.Max
			util = s.FormatUnit(0, "%")
		}
		if s := row.Stat("speedup_vs_sync"); s.N > 0 {
			speed = s.FormatUnit(1, "×")
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %.1f | %s | %.2f× | %s | %.1f | %.1f | %.1f | %.1f |\n",
			r0.Mode, r0.Conns, r0.Window, row.Stat("goodput_mb_per_sec").Format(1), row.Stat("wire_mb_per_sec").Median, util,
			row.Stat("compression_ratio").Median, speed, row.Stat("elapsed_s").Median, row.Stat("cpu_agent_s").Median,
			row.Stat("cpu_sink_s").Median, row.Stat("cpu_link_s").Median)
	}
}

// MedianRun is the run of g with the median goodput (the lower of the
// middle two for an even count): what a chart of one bar per mode shows.
func MedianRun(g []WANResult) WANResult {
	s := append([]WANResult(nil), g...)
	slices.SortFunc(s, func(a, b WANResult) int { return cmp.Compare(a.GoodputMBps(), b.GoodputMBps()) })
	return s[(len(s)-1)/2]
}

// WriteWANSVG draws goodput per mode, one group of bars per scenario, on a
// log scale (sync and compressed async differ by orders of magnitude).
func WriteWANSVG(w io.Writer, title string, rs []WANResult) error {
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
