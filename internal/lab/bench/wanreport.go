package bench

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
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
