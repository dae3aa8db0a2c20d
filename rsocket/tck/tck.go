// Package tck is a conformance runner for RSocket servers: it connects to
// any server (tcp://, tls://, ws://, wss://) and checks the rules of
// Protocol.md (rsocket/rsocket) that a client can observe, by sending raw
// frames, including ones a well-behaved client never sends. The official
// TCK (rsocket-tck) is dead; this is what `sluice rsocket tck` runs.
//
// Every check opens its own connection and is bounded by Config.Timeout.
// Checks that need the server to do something (echo a request, stream n
// elements) rely on the echo contract of `sluice rsocket serve`, which the
// interop servers of every peer implement too: request-response echoes,
// request-stream with data "n" sends "0".."n-1", request-channel echoes,
// data "error:MSG" fails with APPLICATION_ERROR(MSG). A probe decides
// whether the server follows it; if not, those checks are skipped and only
// the application-independent ones run.
//
// Where a rule needs the absence of a frame ("never more than granted"),
// the runner waits Config.Quiet for it: a server slower than that could
// pass a check it should fail, never the reverse.
package tck

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// Config says what to test and how patiently.
type Config struct {
	URL string      // tcp://HOST:PORT, tls://HOST:PORT, ws://HOST:PORT/PATH, wss://HOST:PORT/PATH
	TLS *tls.Config // for tls:// and wss:// (nil: system roots)
	// Timeout bounds each check (default 5s).
	Timeout time.Duration
	// Quiet is how long a check waits to conclude that a frame does not
	// come (default 300ms).
	Quiet time.Duration
	// MetadataMIME and DataMIME go in SETUP (default application/octet-stream).
	MetadataMIME, DataMIME string
	// Only, when not empty, runs only the checks with these ids.
	Only []string
}

// Status is a check's outcome.
type Status string

const (
	Pass Status = "pass"
	Fail Status = "fail" // a MUST of the spec is broken
	Warn Status = "warn" // allowed by the letter of the spec, but surprising (detail says why)
	Skip Status = "skip" // not applicable to this server
)

// Result is one check's outcome.
type Result struct {
	ID      string  `json:"id"`
	Rule    string  `json:"rule"`
	Section string  `json:"section"`
	Status  Status  `json:"status"`
	Detail  string  `json:"detail"`
	Seconds float64 `json:"seconds"`
}

// Report is a run's outcome.
type Report struct {
	URL     string    `json:"url"`
	Started time.Time `json:"started"`
	Results []Result  `json:"results"`
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool {
	for _, x := range r.Results {
		if x.Status == Fail {
			return true
		}
	}
	return false
}

// Counts returns the number of results per status.
func (r *Report) Counts() map[Status]int {
	n := map[Status]int{}
	for _, x := range r.Results {
		n[x.Status]++
	}
	return n
}

// WriteTable prints the results as an aligned table and a summary line.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSECTION\tRESULT\tDETAIL")
	for _, x := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", x.ID, x.Section, strings.ToUpper(string(x.Status)), x.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	n := r.Counts()
	_, err := fmt.Fprintf(w, "%s: %d checks: %d pass, %d fail, %d warn, %d skip\n", r.URL, len(r.Results), n[Pass], n[Fail], n[Warn], n[Skip])
	return err
}

// WriteMarkdown prints the results as a Markdown table.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| check | rule | section | result | detail |\n|---|---|---|---|---|\n")
	for _, x := range r.Results {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", x.ID, x.Rule, x.Section, x.Status, strings.ReplaceAll(x.Detail, "|", "\\|"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Run runs the checks against cfg.URL, one after the other.
func Run(ctx context.Context, cfg Config) *Report {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Quiet <= 0 {
		cfg.Quiet = 300 * time.Millisecond
	}
	if cfg.MetadataMIME == "" {
		cfg.MetadataMIME = "application/octet-stream"
	}
	if cfg.DataMIME == "" {
		cfg.DataMIME = "application/octet-stream"
	}
	rep := &Report{URL: cfg.URL, Started: time.Now().UTC()}
	obs := &observer{}
	only := map[string]bool{}
	for _, id := range cfg.Only {
		only[id] = true
	}
	echo := Status("")
	var echoWhy string
	for _, c := range checks {
		if len(only) > 0 && !only[c.id] {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		res := Result{ID: c.id, Rule: c.rule, Section: c.section}
		start := time.Now()
		switch {
		case c.id == "echo-contract":
			echo, echoWhy = runOne(ctx, &cfg, obs, probeEcho)
			res.Status, res.Detail = echo, echoWhy
			if echo != Pass {
				res.Status = Skip // not a rule of the spec
			}
		case c.echo:
			if echo == "" {
				echo, echoWhy = runOne(ctx, &cfg, obs, probeEcho)
			}
			if echo != Pass {
				res.Status, res.Detail = Skip, "the server does not follow the echo contract: "+echoWhy
				break
			}
			fallthrough
		default:
			res.Status, res.Detail = runOne(ctx, &cfg, obs, c.run)
		}
		res.Seconds = time.Since(start).Round(time.Millisecond).Seconds()
		rep.Results = append(rep.Results, res)
	}
	for _, p := range passive {
		if len(only) > 0 && !only[p.id] {
			continue
		}
		st, d := p.judge(obs)
		rep.Results = append(rep.Results, Result{ID: p.id, Rule: p.rule, Section: p.section, Status: st, Detail: d})
	}
	return rep
}

// runOne runs one check with its own deadline and closes what it opened.
func runOne(ctx context.Context, cfg *Config, obs *observer, f func(*T) (Status, string)) (Status, string) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	t := &T{ctx: ctx, cfg: cfg, obs: obs}
	defer t.closeAll()
	type out struct {
		s Status
		d string
	}
	ch := make(chan out, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				ch <- out{Fail, fmt.Sprintf("runner error: %v", r)}
			}
		}()
		s, d := f(t)
		ch <- out{s, d}
	}()
	select {
	case o := <-ch:
		return o.s, o.d
	case <-ctx.Done():
		t.closeAll() // unblocks the check, which then ends on its own
		return Fail, fmt.Sprintf("no verdict within %v", cfg.Timeout)
	}
}

// observer collects what every connection received, for the passive checks.
type observer struct {
	mu                sync.Mutex
	frames            int
	invalid           []string
	badErrors         []string
	emptyPayloads     []string
	requests          int
	oddRequests       []string
	fragmented        int
	fragmentViolation []string
}

func (o *observer) saw(f []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.frames++
	h, err := frame.Validate(f)
	if err != nil {
		if !(frame.IsIgnorable(err) && h.CanIgnore()) {
			o.invalid = appendMax(o.invalid, fmt.Sprintf("%v on stream %d: %v", h.Type, h.StreamID, err))
		}
		return
	}
	switch {
	case h.Type == frame.TypeError:
		e, _ := frame.ParseError(f)
		if why := errorCodeProblem(e.StreamID, e.Code); why != "" {
			o.badErrors = appendMax(o.badErrors, why)
		}
	case h.Type == frame.TypePayload && !h.Has(frame.FlagNext) && !h.Has(frame.FlagComplete):
		o.emptyPayloads = appendMax(o.emptyPayloads, fmt.Sprintf("stream %d flags %#x", h.StreamID, uint16(h.Flags)))
	case h.Type.IsRequest():
		o.requests++
		if h.StreamID%2 == 1 {
			o.oddRequests = appendMax(o.oddRequests, fmt.Sprintf("%v on stream %d", h.Type, h.StreamID))
		}
	}
}

func (o *observer) fragment(violation string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fragmented++
	if violation != "" {
		o.fragmentViolation = appendMax(o.fragmentViolation, violation)
	}
}

func appendMax(s []string, x string) []string {
	if len(s) < 5 {
		s = append(s, x)
	}
	return s
}

// errorCodeProblem says what is wrong with an ERROR's code on its stream.
func errorCodeProblem(stream uint32, c frame.ErrorCode) string {
	switch {
	case c == frame.ErrorCodeReserved || c == frame.ErrorCodeReservedExtension:
		return fmt.Sprintf("reserved code %#x on stream %d", uint32(c), stream)
	case c.IsConnectionScoped() && stream != 0:
		return fmt.Sprintf("%v on stream %d (must be 0)", c, stream)
	case !c.IsConnectionScoped() && stream == 0:
		return fmt.Sprintf("%v on stream 0 (must be > 0)", c)
	case !c.IsConnectionScoped() && !c.IsApplication() && c != frame.ErrorCodeApplicationError &&
		c != frame.ErrorCodeRejected && c != frame.ErrorCodeCanceled && c != frame.ErrorCodeInvalid:
		return fmt.Sprintf("undefined code %#x on stream %d", uint32(c), stream)
	}
	return ""
}

// IDs lists the check ids in the order they run.
func IDs() []string {
	var ids []string
	for _, c := range checks {
		ids = append(ids, c.id)
	}
	for _, p := range passive {
		ids = append(ids, p.id)
	}
	return ids
}
