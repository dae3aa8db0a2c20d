package docs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/benchkit"
	"github.com/sluicehq/sluice/internal/lab/rrbench"
	"github.com/sluicehq/sluice/internal/lab/rwbench"
)

// Every table of measurements in the documents below either is generated
// from a committed `--json` file or says, in a comment right above it,
// where its figures come from and why they are not generated. Generated
// tables sit between
//
//	<!-- generated from docs/X.json by internal/docs TestBenchTables (layout L); … -->
//	<!-- end of generated table -->
//
// and are rendered here from the JSON with the same median (min–max)
// formatting the bench prints, so a figure in the document cannot drift
// from the data it claims to come from. Regenerate with
//
//	SLUICE_UPDATE_DOCS=1 go test ./internal/docs/ -run TestBenchTables
var benchDocs = []string{"docs/benchmarks.md", "docs/olympics.md", "docs/rsocket.md", "docs/xfer.md"}

const (
	genEnd = "<!-- end of generated table -->"
	// figuresMark starts the comment that places a table of figures that
	// is not generated: historical (no JSON was kept), not a measurement
	// (defaults, sizes), or measured by `go test -bench` (no JSON).
	figuresMark = "<!-- figures: "
)

// genBegin matches the first line of a generated block and names its
// JSON file and layout.
var genBegin = regexp.MustCompile(`^<!-- generated from (\S+\.json) by internal/docs TestBenchTables \(layout ([a-z0-9-]+)\); SLUICE_UPDATE_DOCS=1 go test \./internal/docs/ -run TestBenchTables rewrites it -->$`)

// layout renders a committed JSON file as a markdown table and the line
// under it.
type layout func(t *testing.T, path string, raw []byte) string

// fromReport is a layout of a bench --json report (the envelope).
func fromReport(render func(bench.Report) string) layout {
	return func(t *testing.T, path string, raw []byte) string {
		var rep bench.Report
		if err := json.Unmarshal(raw, &rep); err != nil || rep.Command == "" {
			t.Fatalf("%s is not a bench --json report (command, args, machine, rows): %v", path, err)
		}
		return render(rep)
	}
}

var layouts = map[string]layout{
	"rr":                fromReport(func(rep bench.Report) string { return rrTable(rep, false) }),
	"rr-split":          fromReport(func(rep bench.Report) string { return rrTable(rep, true) }),
	"rr-versus":         fromReport(rrVersusTable),
	"rsocket-rr":        fromReport(rsocketRRTable),
	"rsocket-stream":    fromReport(rsocketStreamTable),
	"lb":                fromReport(lbTable),
	"delivery":          fromReport(deliveryTable),
	"ingest":            fromReport(ingestTable),
	"wan-seed":          wanScenario("seed"),
	"wan-thin":          wanScenario("thin"),
	"wan-lan":           wanScenario("lan"),
	"remote-write-thin": fromReport(func(rep bench.Report) string { return remoteWriteTable(rep, "thin") }),
	"remote-write-seed": fromReport(func(rep bench.Report) string { return remoteWriteTable(rep, "seed") }),
}

// remoteWriteTable is one scenario of `bench remote-write` as the bench
// prints it (internal/lab/rwbench PrintTable), its paths in run order.
func remoteWriteTable(rep bench.Report, scenario string) string {
	rs := bench.Results{Rows: rep.Rows}
	var paths []string
	for _, r := range rep.Rows {
		if p, ok := r.Params["path"].(string); ok && r.Params["scenario"] == scenario {
			paths = append(paths, p)
		}
	}
	var b strings.Builder
	rwbench.PrintTable(&b, &rs, scenario, paths)
	return b.String() + provenance(rep)
}

// wanScenario renders one scenario of a bare array of `bench wan` runs
// (its --json before the envelope) with the bench's own PrintWANTable.
func wanScenario(scenario string) layout {
	return func(t *testing.T, path string, raw []byte) string {
		var all []bench.WANResult
		if err := json.Unmarshal(raw, &all); err != nil {
			t.Fatalf("%s is not an array of bench wan runs: %v", path, err)
		}
		var rs []bench.WANResult
		for _, r := range all {
			if r.Scenario == scenario {
				rs = append(rs, r)
			}
		}
		var b strings.Builder
		bench.PrintWANTable(&b, rs)
		b.WriteString("One run per mode; a bare array of runs written before the `--json` envelope: it records no machine, revision or command line.\n")
		return b.String()
	}
}

// provenance is the line under every generated table: how many reps, the
// machine, the revision, and the command that wrote the JSON.
func provenance(rep bench.Report) string {
	m := rep.Machine
	s := fmt.Sprintf("%s, GOMAXPROCS %d, %s, %s", m.GoVersion, m.GOMAXPROCS, m.Date.Format("2006-01-02 15:04 UTC"), benchkit.ShortRev(m.GitRevision))
	if rep.Reps > 1 {
		s = fmt.Sprintf("%d reps per configuration, in alternating order; cells: median (min–max). %s", rep.Reps, s)
	}
	return fmt.Sprintf("%s; `sluice %s %s`\n", s, rep.Command, strings.Join(rep.Args, " "))
}

// rrTable is `bench rr`'s table (rrbench.PrintTable) without the "vs
// tcp" column: the committed olympics runs predate the coalescing tcp
// limit, so a share of their tcp row would be a share of tcp-naive.
func rrTable(rep bench.Report, split bool) string {
	var b strings.Builder
	rrbench.PrintTable(&b, rep.Rows, split, false)
	return b.String() + provenance(rep)
}

// rowAPI is the API a request-response row's client used: sluice's rows
// and rsocket-go's async row say so; gRPC bidi's streams and rsocket-go's
// Block each hold a goroutine per request in flight, the blocking shape.
func rowAPI(r *bench.Row) string {
	if api, ok := r.Params["api"].(string); ok {
		return api
	}
	return "blocking"
}

// sameAPIOwn is sluice's row for the same API, in-flight count and
// connections as the peer row, or nil for sluice's own rows.
func sameAPIOwn(rep bench.Report, peer *bench.Row) *bench.Row {
	if peer.Params["stack"] == "sluice" {
		return nil
	}
	for _, r := range rep.Rows {
		if r.Params["stack"] == "sluice" && rowAPI(r) == rowAPI(peer) && fmt.Sprint(r.Params["inflight"]) == fmt.Sprint(peer.Params["inflight"]) && r.Params["conns"] == peer.Params["conns"] {
			return r
		}
	}
	return nil
}

// repRatio is num's metric over den's, each rep paired with the same rep
// of the other row (the runs alternate, so rep i of both saw the same
// state of the machine).
func repRatio(num, den *bench.Row, metric string) bench.Stat {
	var xs []float64
	for i, m := range num.Reps {
		if i < len(den.Reps) && den.Reps[i][metric] > 0 {
			xs = append(xs, m[metric]/den.Reps[i][metric])
		}
	}
	return bench.Summarize(xs)
}

// rsocketRRTable is `bench rsocket`'s request-response table with an API
// column, and its ratios computed like against like, sluice's blocking API
// against the blocking peers and its async API against async ones (the
// bench itself, before issue 26, divided the async API's rate by blocking
// peers'): sluice's req/s ÷ the peer's, and the peer's CPU per request ÷
// sluice's, so that above 1 is sluice ahead in both.
func rsocketRRTable(rep bench.Report) string {
	var b strings.Builder
	b.WriteString("| run | API | req/s | p50 | p99 | CPU per request | sluice ÷ this, same API (req/s) | this ÷ sluice, same API (CPU per request) |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	us := func(r *bench.Row, k string) string { return r.Stat(k).FormatUnit(1, " µs") }
	for _, r := range rep.Rows {
		if r.Stat("req_per_sec").N == 0 {
			continue
		}
		rate, cpu := "", ""
		if own := sameAPIOwn(rep, r); own != nil {
			rate = repRatio(own, r, "req_per_sec").FormatUnit(2, "×")
			cpu = repRatio(r, own, "cpu_us_per_req").FormatUnit(2, "×")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Name, rowAPI(r), r.Stat("req_per_sec").Format(0), us(r, "p50_us"), us(r, "p99_us"), us(r, "cpu_us_per_req"), rate, cpu)
	}
	return b.String() + provenance(rep)
}

// rrPeerAPI is the API of a `bench rr` client: every client holds one
// goroutine per request in flight (sluice's rsocket rows use the blocking
// API) except rsocket-go's SubscribeWith loop.
func rrPeerAPI(protocol string) string {
	if strings.HasSuffix(protocol, "-async") {
		return "async"
	}
	return "blocking"
}

// rrVersusTable is the olympics' headline at 128 in flight: sluice's
// `rsocket` row against each other contestant whose client uses the same
// API, per rep, for req/s and for CPU per request. Contestants on another
// API get no ratio: `bench rr` runs sluice's blocking API only.
func rrVersusTable(rep bench.Report) string {
	var b strings.Builder
	b.WriteString("| contestant at 128 in flight | client API | req/s | CPU µs/req | sluice `rsocket` ÷ this (req/s) | this ÷ sluice `rsocket` (CPU per request) |\n|---|---|---:|---:|---:|---:|\n")
	var own *bench.Row
	for _, r := range rep.Rows {
		if r.Params["protocol"] == "rsocket" && fmt.Sprint(r.Params["inflight"]) == "128" {
			own = r
		}
	}
	for _, r := range rep.Rows {
		proto := fmt.Sprint(r.Params["protocol"])
		if own == nil || r == own || fmt.Sprint(r.Params["inflight"]) != "128" {
			continue
		}
		rate, cpu := "", ""
		if rrPeerAPI(proto) == "blocking" {
			rate = repRatio(own, r, "rps").FormatUnit(2, "×")
			cpu = repRatio(r, own, "cpu_us_per_req").FormatUnit(2, "×")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", proto, rrPeerAPI(proto), r.Stat("rps").Format(0), r.Stat("cpu_us_per_req").Format(1), rate, cpu)
	}
	return b.String() + provenance(rep)
}

// rsocketStreamTable is `bench rsocket`'s request-stream table.
func rsocketStreamTable(rep bench.Report) string {
	var b strings.Builder
	b.WriteString("| run | payloads/s | sluice ÷ this |\n|---|---:|---:|\n")
	for _, r := range rep.Rows {
		if r.Stat("payloads_per_sec").N == 0 {
			continue
		}
		ratio := ""
		if st := r.Stat("sluice_ratio"); st.N > 0 {
			ratio = st.FormatUnit(2, "×")
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.Name, r.Stat("payloads_per_sec").Format(0), ratio)
	}
	return b.String() + provenance(rep)
}

// lbTable is `bench lb`'s table (internal/lab/lbbench printTable); the
// slowed servers are the first params["slowed"] of params["servers"].
func lbTable(rep bench.Report) string {
	var b strings.Builder
	b.WriteString("| policy | requests/s | share of slowed | share per server | p50 | p90 | p99 | p99.9 | errors |\n|---|---:|---:|---|---:|---:|---:|---:|---:|\n")
	servers, _ := rep.Params["servers"].(float64)
	slowed, _ := rep.Params["slowed"].(float64)
	for _, r := range rep.Rows {
		shares := make([]string, int(servers))
		for i := range shares {
			shares[i] = fmt.Sprintf("%.1f%%", 100*r.Stat(fmt.Sprintf("share_server%d", i)).Median)
			if i < int(slowed) {
				shares[i] += " (slow)"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Name, r.Stat("requests_per_sec").Format(0),
			benchkit.Pct1(r.Stat("slow_share")), strings.Join(shares, " / "),
			r.Stat("p50_s").FormatDuration(), r.Stat("p90_s").FormatDuration(), r.Stat("p99_s").FormatDuration(),
			r.Stat("p999_s").FormatDuration(), r.Stat("errors").Format(0))
	}
	return b.String() + provenance(rep)
}

// deliveryTable is `bench delivery`'s table (internal/lab/deliverybench
// printTable): the log append baseline (its first row), the raw file
// writes measured beside it, then every delivery run.
func deliveryTable(rep bench.Report) string {
	var b strings.Builder
	b.WriteString("| run | records/s | MB/s (records) | MB/s (wire) | ack p50 | ack p99 | vs log append |\n|---|---:|---:|---:|---:|---:|---:|\n")
	if len(rep.Rows) == 0 {
		return b.String() + provenance(rep)
	}
	logRow := rep.Rows[0]
	fmt.Fprintf(&b, "| %s | %s | %s | | | | 100%% |\n", logRow.Name, logRow.Stat("records_per_sec").Format(0), logRow.Stat("mb_per_sec").Format(1))
	fmt.Fprintf(&b, "| raw file writes, same cadence | | %s | | | | %s |\n", logRow.Stat("raw_mb_per_sec").Format(1), benchkit.Pct(logRow.Stat("raw_vs_log")))
	for _, r := range rep.Rows[1:] {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Name, r.Stat("records_per_sec").Format(0),
			r.Stat("mb_per_sec").Format(1), r.Stat("wire_mb_per_sec").Format(1),
			r.Stat("ack_p50_s").FormatDuration(), r.Stat("ack_p99_s").FormatDuration(),
			benchkit.Pct(r.Stat("vs_log")))
	}
	return b.String() + provenance(rep)
}

// ingestTable is `bench ingest`'s records, CPU, delivered-ack and ratio
// columns as docs/benchmarks.md's issue 27 section shows them: thousands
// separated, latencies in ms below a second.
func ingestTable(rep bench.Report) string {
	var b strings.Builder
	b.WriteString("| run | records/s | CPU µs/record | machine busy | delivered ack p50 | delivered ack p99 | vs franz-go (c) | vs Java zstd (e) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rep.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Name, spread(r.Stat("records_per_sec"), thousands),
			optional(r, "cpu_us_per_record", func(s bench.Stat) string { return s.Format(2) }),
			optional(r, "machine_busy", func(s bench.Stat) string { return spread(s, percent) }),
			optional(r, "delivered_ack_p50_s", func(s bench.Stat) string { return spread(s, secondsMS) }),
			optional(r, "delivered_ack_p99_s", func(s bench.Stat) string { return spread(s, secondsMS) }),
			optional(r, "vs_franz_go", func(s bench.Stat) string { return s.FormatUnit(2, "×") }),
			optional(r, "vs_java_zstd", func(s bench.Stat) string { return s.FormatUnit(2, "×") }))
	}
	return b.String() + provenance(rep)
}

// optional formats metric k, or leaves the cell empty for a row that does
// not measure it.
func optional(r *bench.Row, k string, format func(bench.Stat) string) string {
	if st := r.Stat(k); st.N > 0 {
		return format(st)
	}
	return ""
}

// spread is "median (min–max)" with each number formatted by f.
func spread(s bench.Stat, f func(float64) string) string {
	if s.N == 1 {
		return f(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", f(s.Median), f(s.Min), f(s.Max))
}

// percent is a share (0 to 1) as a whole percentage: 96 %.
func percent(x float64) string { return fmt.Sprintf("%.0f %%", 100*x) }

// thousands rounds x and separates its thousands with commas: 500,005.
func thousands(x float64) string {
	d := fmt.Sprintf("%.0f", x)
	for i := len(d) - 3; i > 0; i -= 3 {
		d = d[:i] + "," + d[i:]
	}
	return d
}

// secondsMS prints seconds below one as milliseconds with one decimal,
// and from one up as seconds with two.
func secondsMS(x float64) string {
	if x < 1 {
		return fmt.Sprintf("%.1f ms", x*1e3)
	}
	return fmt.Sprintf("%.2f s", x)
}

// readJSON reads a committed JSON file a generated table names.
func readJSON(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatalf("a generated table names %s: %v", path, err)
	}
	return raw
}

// regenerate returns doc with every generated block rendered anew from
// its JSON, and the blocks' first lines.
func regenerate(t *testing.T, name string, doc []byte) ([]byte, int) {
	t.Helper()
	var out bytes.Buffer
	lines := strings.SplitAfter(string(doc), "\n")
	blocks := 0
	for i := 0; i < len(lines); i++ {
		out.WriteString(lines[i])
		m := genBegin.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			if strings.HasPrefix(lines[i], "<!-- generated from") {
				t.Errorf("%s:%d: a generated block's first line must match %s", name, i+1, genBegin)
			}
			continue
		}
		blocks++
		render, ok := layouts[m[2]]
		if !ok {
			t.Fatalf("%s:%d: no layout %q in internal/docs/benchtables_test.go", name, i+1, m[2])
		}
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != genEnd {
			end++
		}
		if end == len(lines) {
			t.Fatalf("%s:%d: generated block without %s", name, i+1, genEnd)
		}
		out.WriteString(render(t, m[1], readJSON(t, m[1])))
		out.WriteString(lines[end])
		i = end
	}
	return out.Bytes(), blocks
}

// TestBenchTables: every generated table is what its JSON renders to
// today, and every table of figures in benchDocs is generated or marked.
func TestBenchTables(t *testing.T) {
	for _, name := range benchDocs {
		path := filepath.Join(root, name)
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := regenerate(t, name, doc)
		if os.Getenv("SLUICE_UPDATE_DOCS") == "1" && !bytes.Equal(doc, want) {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			doc = want
		}
		if !bytes.Equal(doc, want) {
			t.Errorf("%s: a generated table differs from its JSON (%s); regenerate with SLUICE_UPDATE_DOCS=1 go test ./internal/docs/ -run TestBenchTables", name, firstDiff(doc, want))
		}
		for _, tb := range unsourcedTables(string(doc)) {
			t.Errorf("%s:%d: a table of figures that is neither generated from a committed --json file nor marked %q… above it (historical, not measured, or go test -bench):\n\t%s", name, tb.line, figuresMark, tb.head)
		}
	}
}

// firstDiff names the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) && i < len(w); i++ {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d is\n\t%s\nthe JSON gives\n\t%s", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("%d lines against %d", len(g), len(w))
}

type docTable struct {
	line int // 1-based, the header row
	head string
}

var (
	tableSep = regexp.MustCompile(`^\|[-:| ]+\|$`)
	codeSpan = regexp.MustCompile("`[^`]*`|\\]\\([^)]*\\)")
	// figure matches a measured quantity in a cell: a number with a unit
	// of time, rate, ratio or share, or a cell that is only numbers (a
	// median with its spread).
	figure     = regexp.MustCompile(`\d\s*(?:µs|ms|ns|s\b|[kMG]?B/s|/s|×|%|k\b|M\b|[kMG]iB/s)`)
	bareNumber = regexp.MustCompile(`^[\d.,]+(?:\s*\([\d.,]+[–-][\d.,]+\))?$`)
)

// unsourcedTables lists the tables of figures in doc outside fenced code
// and generated blocks with no figures comment on the line above.
func unsourcedTables(doc string) []docTable {
	lines := strings.Split(doc, "\n")
	var out []docTable
	fenced, generated := false, false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "```"):
			fenced = !fenced
		case genBegin.MatchString(strings.TrimSpace(l)):
			generated = true
		case strings.TrimSpace(l) == genEnd:
			generated = false
		}
		if fenced || generated || !strings.HasPrefix(l, "|") || i+1 >= len(lines) || !tableSep.MatchString(strings.TrimSpace(lines[i+1])) {
			continue
		}
		end := i + 2
		for end < len(lines) && strings.HasPrefix(lines[end], "|") {
			end++
		}
		if hasFigures(lines[i+2:end]) && (i == 0 || !strings.HasPrefix(lines[i-1], figuresMark)) {
			out = append(out, docTable{line: i + 1, head: l})
		}
		i = end - 1
	}
	return out
}

// hasFigures reports whether any cell of rows holds a measured quantity.
func hasFigures(rows []string) bool {
	for _, row := range rows {
		for _, cell := range strings.Split(strings.Trim(row, "|"), "|") {
			c := strings.TrimSpace(codeSpan.ReplaceAllString(cell, ""))
			if figure.MatchString(c) || bareNumber.MatchString(c) || mostlyNumber(c) {
				return true
			}
		}
	}
	return false
}

// mostlyNumber reports whether a cell with a digit is less than half
// letters: "112 (0.20), 4.55" or "**98 %**", where "16 KiB" or "at 128
// in flight" are not.
func mostlyNumber(cell string) bool {
	letters, other := 0, 0
	digit := false
	for _, r := range cell {
		switch {
		case unicode.IsLetter(r):
			letters++
		case unicode.IsDigit(r):
			digit = true
			other++
		case !unicode.IsSpace(r):
			other++
		}
	}
	return digit && letters < other
}

// TestUnsourcedTablesFound: the check above sees a table of figures
// without a comment, and lets one with a comment or of no figures pass.
func TestUnsourcedTablesFound(t *testing.T) {
	doc := "| run | req/s |\n|---|---|\n| a | 12 (10–14) |\n\n" +
		"| run | before | after |\n|---|---|---|\n| a | 112 (0.20), 4.55 | 116 (0.22), 3.46 |\n\n" +
		figuresMark + "historical -->\n| run | p50 |\n|---|---|\n| b | 17 µs |\n\n" +
		"| limit | meaning |\n|---|---|\n| `64` | frames of `16 MiB` |\n"
	got := unsourcedTables(doc)
	if len(got) != 2 || got[0].line != 1 || got[1].line != 5 {
		t.Fatalf("unsourced tables %+v, want the ones at lines 1 and 5", got)
	}
}

// TestGeneratedTableDriftFound: a generated table whose figures are not
// its JSON's is rewritten from the JSON (so TestBenchTables, comparing
// the two, fails on it).
func TestGeneratedTableDriftFound(t *testing.T) {
	begin := "<!-- generated from docs/bench-lb.json by internal/docs TestBenchTables (layout lb); SLUICE_UPDATE_DOCS=1 go test ./internal/docs/ -run TestBenchTables rewrites it -->\n"
	stale := "text\n" + begin + "| policy | requests/s |\n|---|---|\n| predictive | 123456 |\n" + genEnd + "\nmore text\n"
	got, blocks := regenerate(t, "stale.md", []byte(stale))
	if blocks != 1 || bytes.Equal(got, []byte(stale)) {
		t.Fatalf("%d blocks, the stale table was kept:\n%s", blocks, got)
	}
	if s := string(got); strings.Contains(s, "123456") || !strings.Contains(s, "| predictive | 90202 (81910–95009) |") ||
		!strings.HasPrefix(s, "text\n"+begin) || !strings.HasSuffix(s, genEnd+"\nmore text\n") {
		t.Errorf("regenerated:\n%s", s)
	}
}
