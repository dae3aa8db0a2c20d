package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

func TestSummarize(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []float64
		want Stat
	}{
		{"one", []float64{5}, Stat{Median: 5, Min: 5, Max: 5, N: 1}},
		{"odd count: the middle value", []float64{9, 1, 4}, Stat{Median: 4, Min: 1, Max: 9, N: 3}},
		{"even count: mean of the middle two", []float64{10, 1, 4, 6}, Stat{Median: 5, Min: 1, Max: 10, N: 4}},
		{"NaN left out", []float64{math.NaN(), 2, 3}, Stat{Median: 2.5, Min: 2, Max: 3, N: 2}},
	} {
		if got := Summarize(c.in); got != c.want {
			t.Errorf("%s: Summarize(%v) = %+v, want %+v", c.name, c.in, got, c.want)
		}
	}
	if s := Summarize(nil); s.N != 0 || !math.IsNaN(s.Median) {
		t.Errorf("Summarize(nil) = %+v, want N 0 and NaN", s)
	}
	in := []float64{3, 1, 2}
	Summarize(in)
	if !reflect.DeepEqual(in, []float64{3, 1, 2}) {
		t.Errorf("Summarize reordered its input: %v", in)
	}
}

func TestStatFormat(t *testing.T) {
	for _, c := range []struct {
		s    Stat
		prec int
		want string
	}{
		{Summarize([]float64{1234.56}), 1, "1234.6"},
		{Summarize([]float64{3, 1, 2}), 0, "2 (1–3)"},
		{Summarize([]float64{1.5, 2.5}), 2, "2.00 (1.50–2.50)"},
		{Summarize(nil), 1, "–"},
	} {
		if got := c.s.Format(c.prec); got != c.want {
			t.Errorf("%+v.Format(%d) = %q, want %q", c.s, c.prec, got, c.want)
		}
	}
	if got := Summarize([]float64{0.002, 0.001, 0.0031234}).FormatDuration(); got != "2ms (1ms–3.12ms)" {
		t.Errorf("FormatDuration = %q", got)
	}
	if got := Summarize([]float64{1.148934, 0.52019}).FormatDuration(); got != "835ms (520ms–1.149s)" {
		t.Errorf("FormatDuration = %q", got)
	}
	if got := Summarize([]float64{1.2}).FormatUnit(2, "×"); got != "1.20×" {
		t.Errorf("FormatUnit = %q", got)
	}
	if got := Summarize([]float64{1.2, 1.1, 1.3}).FormatUnit(2, "×"); got != "1.20× (1.10–1.30)" {
		t.Errorf("FormatUnit = %q", got)
	}
}

// Reps alternate direction, so no configuration always runs first or last.
func TestRepOrder(t *testing.T) {
	got := RepOrder(3, 3)
	want := []RepStep{{0, 0}, {0, 1}, {0, 2}, {1, 2}, {1, 1}, {1, 0}, {2, 0}, {2, 1}, {2, 2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RepOrder(3, 3) = %v, want %v", got, want)
	}
	if n := len(RepOrder(0, 4)); n != 0 {
		t.Errorf("RepOrder(0, 4) has %d steps", n)
	}
}

func TestReportJSON(t *testing.T) {
	var rs Results
	rs.Add("plain", map[string]any{"compression": "plain"}, Metrics{"records_per_sec": 100, "ack_p99_s": 0.002})
	rs.Add("zstd", map[string]any{"compression": "zstd"}, Metrics{"records_per_sec": 300})
	rs.Add("plain", nil, Metrics{"records_per_sec": 200, "ack_p99_s": math.NaN()})
	rs.Add("plain", nil, Metrics{"records_per_sec": 600, "ack_p99_s": math.Inf(1)})
	rep := Report{Command: "bench delivery", Args: []string{"--reps", "3"}, Reps: 3,
		Machine: Machine{GoVersion: "go1.x", GOMAXPROCS: 2}, Rows: rs.Rows, Notes: []string{"bound"}}
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Command string
		Reps    int
		Machine struct {
			GoVersion  string `json:"go_version"`
			GOMAXPROCS int    `json:"gomaxprocs"`
			Date       string `json:"date"`
		}
		Rows []struct {
			Name    string
			Params  map[string]any
			Reps    []map[string]float64
			Summary map[string]Stat
		}
		Notes []string
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if got.Command != "bench delivery" || got.Reps != 3 || got.Machine.GOMAXPROCS != 2 || got.Machine.GoVersion != "go1.x" ||
		got.Machine.Date == "" || len(got.Notes) != 1 {
		t.Errorf("header: %+v", got)
	}
	if len(got.Rows) != 2 || got.Rows[0].Name != "plain" || got.Rows[1].Name != "zstd" {
		t.Fatalf("rows: %+v", got.Rows)
	}
	plain := got.Rows[0]
	if plain.Params["compression"] != "plain" || len(plain.Reps) != 3 || plain.Reps[1]["records_per_sec"] != 200 {
		t.Errorf("plain row: %+v", plain)
	}
	if _, ok := plain.Reps[1]["ack_p99_s"]; ok {
		t.Errorf("NaN metric kept: %+v", plain.Reps[1])
	}
	if s := plain.Summary["records_per_sec"]; s != (Stat{Median: 200, Min: 100, Max: 600, N: 3}) {
		t.Errorf("records_per_sec summary %+v", s)
	}
	if s := plain.Summary["ack_p99_s"]; s.N != 1 || s.Median != 0.002 {
		t.Errorf("ack_p99_s summary %+v (a metric some reps lack)", s)
	}
}

func TestCurrentMachine(t *testing.T) {
	m := CurrentMachine()
	if m.GOMAXPROCS < 1 || m.GoVersion == "" || m.Date.IsZero() {
		t.Errorf("%+v", m)
	}
}
