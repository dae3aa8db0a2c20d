package status

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/testskip"
)

// TestAxisLabels runs page.html's axisLabels (with its fmtBytes, fmtNum and
// niceCeil) in node: an idle chart says 0 once, and no chart labels two
// lines alike. Before, the idle bytes chart read "1 B / 1 B / 0 B".
func TestAxisLabels(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testskip.Missing(t, "", "node", "node not found: "+err.Error())
	}
	var src strings.Builder
	for _, name := range []string{"fmtNum", "fmtBytes", "niceCeil", "axisLabels"} {
		m := regexp.MustCompile(`(?ms)^function ` + name + `\(.*?^}\n`).Find(page)
		if m == nil {
			t.Fatalf("page.html has no function %s", name)
		}
		src.Write(m)
	}
	maxes := []float64{0, 0.3, 1, 1.5, 7, 10, 999, 1000, 1024, 5000, 123456, 3e9}
	src.WriteString(`const out = [];
for (const m of ` + mustJSON(t, maxes) + `) out.push({ max: m, bytes: axisLabels(m, fmtBytes), num: axisLabels(m, fmtNum) });
console.log(JSON.stringify(out));
`)
	js := filepath.Join(t.TempDir(), "axis.js")
	if err := os.WriteFile(js, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(node, js).Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, src.String())
	}
	type axis struct {
		Top    float64  `json:"top"`
		Labels []string `json:"labels"`
	}
	var got []struct {
		Max        float64 `json:"max"`
		Bytes, Num axis
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	for _, g := range got {
		for _, a := range []axis{g.Bytes, g.Num} {
			if a.Top < g.Max {
				t.Errorf("max %g: top %g below it", g.Max, a.Top)
			}
			seen := map[string]bool{}
			for _, l := range a.Labels {
				if l != "" && seen[l] {
					t.Errorf("max %g: labels %q repeat %q", g.Max, a.Labels, l)
				}
				seen[l] = true
			}
		}
	}
	want := map[float64][2][]string{
		0:    {{"", "", "0 B"}, {"", "", "0"}},
		1:    {{"2 B", "1 B", "0 B"}, {"2", "1", "0"}},
		7:    {{"8 B", "4 B", "0 B"}, {"10", "5", "0"}},
		1000: {{"2.0 KiB", "1.0 KiB", "0 B"}, {"2000", "1000", "0"}},
		5000: {{"8.0 KiB", "4.0 KiB", "0 B"}, {"10.0 k", "5000", "0"}},
	}
	for _, g := range got {
		if w, ok := want[g.Max]; ok {
			if !equal(g.Bytes.Labels, w[0]) || !equal(g.Num.Labels, w[1]) {
				t.Errorf("max %g: bytes %q, numbers %q; want %q, %q", g.Max, g.Bytes.Labels, g.Num.Labels, w[0], w[1])
			}
		}
	}
	t.Logf("%+v", got)
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func equal(a, b []string) bool {
	return strings.Join(a, "|") == strings.Join(b, "|")
}
