package chart

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/lab/bench"
)

// RR draws a latency bar per percentile and row, and with closed-loop
// rows a throughput line per protocol.
func TestRR(t *testing.T) {
	var rs bench.Results
	for _, p := range []string{"grpc", "sluice"} {
		for _, n := range []int{1, 16} {
			rs.Add(p+" closed", map[string]any{"protocol": p, "mode": "closed", "inflight": n},
				bench.Metrics{"p50_us": 50, "p99_us": 200, "p999_us": 900, "rps": float64(1000 * n)})
		}
	}
	svg := RR(rs)
	if got := strings.Count(svg, "<polyline"); got != 2 {
		t.Errorf("%d throughput lines, want one per protocol (2)", got)
	}
	if !strings.HasSuffix(svg, "</svg>\n") {
		t.Error("not a whole SVG")
	}
	open := RR(bench.Results{Rows: rs.Rows[:0]})
	if strings.Contains(open, "<polyline") || !strings.HasSuffix(open, "</svg>\n") {
		t.Error("no closed-loop rows: want the latency chart alone")
	}
}

// Upload draws one line per transport and source, the seed's dotted.
func TestUpload(t *testing.T) {
	svg := string(Upload([]UploadPoint{
		{"grpc", "memory", 16 << 10, 900}, {"grpc", "memory", 64 << 10, 1500},
		{"grpc", "disk", 16 << 10, 800}, {"gupload gRPC", "(field notes)", 16 << 10, 1570},
	}, 64<<20))
	if got := strings.Count(svg, "<polyline"); got != 3 {
		t.Errorf("%d lines, want 3", got)
	}
	if !strings.Contains(svg, `stroke-dasharray="1,3"`) || !strings.Contains(svg, "64 MiB file") {
		t.Errorf("gupload line not dotted or size missing:\n%s", svg)
	}
}

// WAN draws a bar per scenario and mode.
func TestWAN(t *testing.T) {
	var b bytes.Buffer
	rs := []bench.WANResult{{Scenario: "seed", Mode: "sync", RawBytes: 1 << 20, Elapsed: time.Second},
		{Scenario: "seed", Mode: "async", RawBytes: 8 << 20, Elapsed: time.Second}}
	if err := WAN(&b, "t", rs); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(b.String(), "<rect x="); got != 2+2 { // bars and legend
		t.Errorf("%d rects, want 4:\n%s", got, b.String())
	}
}
