package chart

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/defaults"
)

// UploadPoint is one cell of an upload sweep on the chart: a transport
// and source (one line each; a Series starting "gupload" is drawn as
// a reference, dotted) at one chunk size.
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
// references of "Sending files via gRPC" dotted in black and grey.
func uploadStyle(i int, k string) (col, dash string) {
	colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}
	col = colors[i%len(colors)]
	if strings.HasSuffix(k, "disk") {
		dash = ` stroke-dasharray="5,3"`
	}
	if strings.HasPrefix(k, "gupload") {
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
