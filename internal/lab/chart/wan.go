package chart

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	"github.com/sluicehq/sluice/internal/lab/bench"
)

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
