package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/buildinfo"
)

// This file is what every `sluice bench` command shares: the order of
// repeated runs, their median and spread, and the JSON file of results.

// RepOrder returns the order in which to run configs configurations reps
// times each: every rep runs each configuration once, and odd reps run them
// backwards (A B C, C B A, A B C, ...), so that slow drift of the machine
// (page cache, thermal state, other load) hits every configuration alike
// instead of whichever runs last.
func RepOrder(reps, configs int) []RepStep {
	var out []RepStep
	for r := 0; r < reps; r++ {
		for i := 0; i < configs; i++ {
			c := i
			if r%2 == 1 {
				c = configs - 1 - i
			}
			out = append(out, RepStep{Rep: r, Config: c})
		}
	}
	return out
}

// RepStep is one run: configuration Config in repetition Rep.
type RepStep struct{ Rep, Config int }

// Stat summarises one metric over the reps of a configuration.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// Summarize returns the median (the mean of the middle two for an even
// count), minimum and maximum of xs; NaN values are left out. All fields
// are NaN (N 0) when nothing is left.
func Summarize(xs []float64) Stat {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Stat{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	slices.Sort(v)
	n := len(v)
	med := v[n/2]
	if n%2 == 0 {
		med = (v[n/2-1] + v[n/2]) / 2
	}
	return Stat{Median: med, Min: v[0], Max: v[n-1], N: n}
}

// Format prints the median with prec decimals and, for more than one
// value, the spread: "123.4 (120.1–130.9)".
func (s Stat) Format(prec int) string { return s.FormatUnit(prec, "") }

// FormatUnit is Format with unit after the median: "1.20× (1.10–1.30)".
func (s Stat) FormatUnit(prec int, unit string) string {
	if s.N == 0 {
		return "–"
	}
	m := fmt.Sprintf("%.*f%s", prec, s.Median, unit)
	if s.N == 1 {
		return m
	}
	return fmt.Sprintf("%s (%.*f–%.*f)", m, prec, s.Min, prec, s.Max)
}

// FormatDuration is Format for a metric kept in seconds, printed as a
// duration with three or four significant digits.
func (s Stat) FormatDuration() string {
	d := func(x float64) string {
		v := time.Duration(x * float64(time.Second))
		round := time.Microsecond
		switch {
		case v >= 100*time.Millisecond:
			round = time.Millisecond
		case v >= 10*time.Millisecond:
			round = 100 * time.Microsecond
		case v >= time.Millisecond:
			round = 10 * time.Microsecond
		}
		return v.Round(round).String()
	}
	switch s.N {
	case 0:
		return "–"
	case 1:
		return d(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", d(s.Median), d(s.Min), d(s.Max))
}

// Metrics are the numbers one run measured, by name (units in the name:
// records_per_sec, ack_p99_s).
type Metrics map[string]float64

// Row is one configuration of a benchmark: its parameters and what each rep
// measured.
type Row struct {
	Name   string         `json:"name"`
	Params map[string]any `json:"params,omitempty"`
	Reps   []Metrics      `json:"reps"`
	// Summary has each metric's median and spread over Reps; filled in by
	// Results.Summarize (WriteJSON calls it).
	Summary map[string]Stat `json:"summary"`
}

// Stat summarises metric over the row's reps.
func (r *Row) Stat(metric string) Stat {
	xs := make([]float64, 0, len(r.Reps))
	for _, m := range r.Reps {
		if x, ok := m[metric]; ok {
			xs = append(xs, x)
		} else {
			xs = append(xs, math.NaN())
		}
	}
	return Summarize(xs)
}

// Results collects the rows of one bench command in the order they were
// first added.
type Results struct {
	Rows []*Row
}

// Add records one rep of the configuration name (created with params on
// first use) and returns its row. NaN and infinite values (a rate over no
// time) are left out: JSON cannot hold them, and they mean "not measured".
func (rs *Results) Add(name string, params map[string]any, m Metrics) *Row {
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			delete(m, k)
		}
	}
	r := rs.Row(name)
	if r == nil {
		r = &Row{Name: name, Params: params}
		rs.Rows = append(rs.Rows, r)
	}
	r.Reps = append(r.Reps, m)
	return r
}

// Row returns the row called name, or nil.
func (rs *Results) Row(name string) *Row {
	for _, r := range rs.Rows {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Summarize fills in every row's Summary.
func (rs *Results) Summarize() {
	for _, r := range rs.Rows {
		names := map[string]bool{}
		for _, m := range r.Reps {
			for k := range m {
				names[k] = true
			}
		}
		r.Summary = make(map[string]Stat, len(names))
		for k := range names {
			if st := r.Stat(k); st.N > 0 {
				r.Summary[k] = st
			}
		}
	}
}

// Machine is where and when the numbers were taken.
type Machine struct {
	Date        time.Time `json:"date"`
	GoVersion   string    `json:"go_version"`
	GOOS        string    `json:"goos"`
	GOARCH      string    `json:"goarch"`
	GOMAXPROCS  int       `json:"gomaxprocs"`
	NumCPU      int       `json:"num_cpu"`
	Hostname    string    `json:"hostname,omitempty"`
	GitRevision string    `json:"git_revision,omitempty"` // "-dirty" appended when the tree had changes
}

// CurrentMachine describes this process. The git revision comes from the
// build's VCS stamp, else (go run does not stamp) from `git rev-parse` in
// the working directory, else it is empty.
func CurrentMachine() Machine {
	host, _ := os.Hostname()
	return Machine{Date: time.Now().UTC().Truncate(time.Second), GoVersion: runtime.Version(),
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GOMAXPROCS: runtime.GOMAXPROCS(0),
		NumCPU: runtime.NumCPU(), Hostname: host, GitRevision: gitRevision()}
}

func gitRevision() string {
	if rev := buildinfo.Revision(); rev != "" {
		return rev
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		rev += "-dirty"
	}
	return rev
}

// Report is the JSON file a bench command writes with --json.
type Report struct {
	Command string         `json:"command"`          // e.g. "bench delivery"
	Args    []string       `json:"args,omitempty"`   // its command line
	Reps    int            `json:"reps"`             // runs of each configuration
	Params  map[string]any `json:"params,omitempty"` // shared by every row
	Machine Machine        `json:"machine"`
	Rows    []*Row         `json:"rows"`
	// Notes are derived lines the table printed (bounds, ratios).
	Notes []string `json:"notes,omitempty"`
}

// WriteJSON writes the report, indented, with every row summarised.
func (rep Report) WriteJSON(w io.Writer) error {
	rs := Results{Rows: rep.Rows}
	rs.Summarize()
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteJSONFile is WriteJSON to a new file at path; an empty path writes
// nothing.
func (rep Report) WriteJSONFile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
