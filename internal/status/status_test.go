package status

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/frame"
)

var quiet = slog.New(slog.DiscardHandler)

// newSinkRegistry starts a real embedded sink (not serving) and returns
// its registry.
func newSinkRegistry(t *testing.T) (*prometheus.Registry, *sink.Sink) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := sink.New(sink.Config{DataDir: t.TempDir(), Registry: reg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return reg, s
}

// TestMetricsExist: every metric of the table is registered by a real
// agent and a real sink (Kafka-only ones excepted). The xfer metrics are
// registered in cmd/sluice and checked there (TestStatusPageOnDaemons).
func TestMetricsExist(t *testing.T) {
	sreg, _ := newSinkRegistry(t)
	areg := prometheus.NewRegistry()
	a, err := agent.New(agent.Config{SinkAddr: "127.0.0.1:1", SpoolDir: filepath.Join(t.TempDir(), "spool"), Registry: areg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for kind, reg := range map[Kind]*prometheus.Registry{KindAgent: areg, KindSink: sreg} {
		fs, err := gather(reg)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range Metrics {
			if m.Kind == kind && !optional[m.Name] && !fs.has(m.Name) {
				t.Errorf("%s registry has no %s (feeds %s)", kind, m.Name, m.Field)
			}
		}
	}
}

func md(t *testing.T, route, token string) []byte {
	t.Helper()
	b, err := Metadata(route, token)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serve starts the status handler and dials its /rsocket.
func serve(t *testing.T, cfg Config) *rsocket.Conn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(Handler(ctx, cfg))
	t.Cleanup(func() { cancel(); srv.Close() })
	c, err := rsocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/rsocket")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestStreamHonoursRequestN: with two credits and none consumed, the
// server builds the third snapshot and then waits in Send; one more credit
// lets exactly one more through.
func TestStreamHonoursRequestN(t *testing.T) {
	reg, _ := newSinkRegistry(t)
	built := make(chan uint64, 100)
	var n uint64
	c := serve(t, Config{Kind: KindSink, Gatherer: reg, Interval: time.Millisecond,
		Providers: []Provider{func(*Snapshot) { n++; built <- n }}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.RequestStream(ctx, rsocket.Payload{Metadata: md(t, RouteStream, "")}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for want := uint64(1); want <= 3; want++ {
		select {
		case got := <-built:
			if got != want {
				t.Fatalf("build %d, want %d", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("only %d snapshots built", want-1)
		}
	}
	// Without credit no fourth snapshot: this can only pass wrongly (a
	// late fourth build), never fail spuriously.
	select {
	case got := <-built:
		t.Fatalf("snapshot %d built without a credit", got)
	case <-time.After(100 * time.Millisecond):
	}
	if err := st.Request(1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-built:
	case <-ctx.Done():
		t.Fatal("no snapshot after REQUEST_N 1")
	}
	var s Snapshot
	p, err := st.Next()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(p.Data, &s); err != nil {
		t.Fatal(err)
	}
	if s.Kind != KindSink || s.Seq != 1 || !s.Ready || s.Sink == nil || s.Throughput == nil || s.Agent != nil {
		t.Fatalf("first snapshot: %+v", s)
	}
}

func TestDetail(t *testing.T) {
	reg, _ := newSinkRegistry(t)
	c := serve(t, Config{Kind: KindSink, Gatherer: reg})
	ctx := context.Background()
	p, err := c.RequestResponse(ctx, rsocket.Payload{Metadata: md(t, RouteDetail, ""), Data: []byte(`{"section":"sink"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var d Detail
	if err := json.Unmarshal(p.Data, &d); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range d.Samples {
		names[s.Name] = true
	}
	if !names["sluice_sink_consumers"] || !names["sluice_sink_streams"] || names["sluice_sink_stored_records_total"] {
		t.Fatalf("sink section samples: %v", names)
	}
	for _, bad := range []struct{ route, data, want string }{
		{RouteDetail, `{"section":"nope"}`, "want JSON"},
		{RouteDetail, `not json`, "want JSON"},
		{"status.other", `{"section":"all"}`, "no request-response route"},
	} {
		_, err := c.RequestResponse(ctx, rsocket.Payload{Metadata: md(t, bad.route, ""), Data: []byte(bad.data)})
		var re *rsocket.Error
		if !errors.As(err, &re) || re.Code != frame.ErrorCodeInvalid || !strings.Contains(re.Message, bad.want) {
			t.Errorf("%s %s: %v, want INVALID %q", bad.route, bad.data, err, bad.want)
		}
	}
	// Metadata that is not composite metadata: a clear error, not a panic.
	_, err = c.RequestResponse(ctx, rsocket.Payload{Metadata: []byte{0x7e}, Data: []byte(`{}`)})
	if err == nil || !strings.Contains(err.Error(), "bad composite metadata") {
		t.Errorf("garbage metadata: %v", err)
	}
}

const (
	agentToken  = "agent-one-token-0123456789"
	readerToken = "reader-token-0123456789abc"
)

// TestAuth: no token and a wrong token are refused with words that say
// which; an agent's token at the sink sees the readiness only; a reader's
// sees everything.
func TestAuth(t *testing.T) {
	toks, err := auth.ParseTokens(strings.NewReader(agentToken + " agent-1\n" + readerToken + " *\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := newSinkRegistry(t)
	c := serve(t, Config{Kind: KindSink, Gatherer: reg, Tokens: toks, Full: auth.Identity.CanRead})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first := func(token string) (Snapshot, error) {
		st, err := c.RequestStream(ctx, rsocket.Payload{Metadata: md(t, RouteStream, token)}, 1)
		if err != nil {
			return Snapshot{}, err
		}
		defer st.Cancel()
		p, err := st.Next()
		if err != nil {
			return Snapshot{}, err
		}
		var s Snapshot
		return s, json.Unmarshal(p.Data, &s)
	}
	for token, want := range map[string]string{"": "unauthorized: this daemon requires a token", "wrong-token-0123456789": "unauthorized: token not valid"} {
		_, err := first(token)
		var re *rsocket.Error
		if !errors.As(err, &re) || re.Code != frame.ErrorCodeRejected || re.Message != want {
			t.Errorf("token %q: %v, want REJECTED %q", token, err, want)
		}
	}
	s, err := first(agentToken)
	if err != nil || !s.Limited || s.Identity != "agent-1" || s.Throughput != nil || s.Sink != nil || s.Readiness == "" {
		t.Errorf("agent token: %+v %v", s, err)
	}
	_, err = c.RequestResponse(ctx, rsocket.Payload{Metadata: md(t, RouteDetail, agentToken), Data: []byte(`{"section":"all"}`)})
	if err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("detail with an agent token: %v", err)
	}
	s, err = first(readerToken)
	if err != nil || s.Limited || s.Identity != "*" || s.Sink == nil {
		t.Errorf("reader token: %+v %v", s, err)
	}
}

// TestPage: the page is served self-contained, under a policy that lets
// it load nothing from elsewhere.
func TestPage(t *testing.T) {
	reg, _ := newSinkRegistry(t)
	srv := httptest.NewServer(Handler(context.Background(), Config{Kind: KindSink, Gatherer: reg}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "class RSocketClient") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("GET /: %d %q", resp.StatusCode, resp.Header)
	}
	for _, ext := range []string{"src=\"http", "href=\"http", "src=\"//", "@import", "url(http"} {
		if strings.Contains(string(b), ext) {
			t.Errorf("page refers outside: %q", ext)
		}
	}
	if resp, err := http.Get(srv.URL + "/nope"); err != nil || resp.StatusCode != 404 {
		t.Errorf("GET /nope: %v %v", resp, err)
	}
	// Another site's page may not open the WebSocket.
	req, _ := http.NewRequest("GET", srv.URL+"/rsocket", nil)
	req.Header.Set("Origin", "http://evil.example")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin upgrade: %v %v", resp, err)
	}
}

func TestRate(t *testing.T) {
	t0 := time.Unix(100, 0)
	prev := &Snapshot{Time: t0, Throughput: &Throughput{TotalRecords: 100, TotalRawBytes: 1000, TotalWireBytes: 500}}
	s := &Snapshot{Time: t0.Add(2 * time.Second), Throughput: &Throughput{TotalRecords: 300, TotalRawBytes: 900, TotalWireBytes: 700}}
	rate(s, prev)
	if s.Throughput.Records != 100 || s.Throughput.RawBytes != 0 || s.Throughput.WireBytes != 100 {
		t.Fatalf("rates %+v (a counter going down, a restart, gives 0)", s.Throughput)
	}
}

// TestAgentRowRates: each agent's records/s comes from its own total in
// the previous snapshot; an agent new since then has none yet; a
// connected agent is last seen at the snapshot's time.
func TestAgentRowRates(t *testing.T) {
	t0 := time.Unix(100, 0)
	left := time.Unix(90, 0)
	agents := []sink.AgentActivity{{ID: "a", Records: 10, LastSeen: left}, {ID: "b", Records: 50, Connected: 1, Vouched: "token"}}
	list := func() []sink.AgentActivity { return append([]sink.AgentActivity(nil), agents...) }
	snap := func(at time.Time) *Snapshot {
		s := &Snapshot{Time: at, Throughput: &Throughput{}, Sink: &SinkStatus{}}
		AgentRows(list)(s)
		return s
	}
	prev := snap(t0)
	agents = []sink.AgentActivity{{ID: "a", Records: 30, LastSeen: left}, {ID: "b", Records: 40, Connected: 2, Vouched: "token"}, {ID: "c", Records: 7, Connected: 1}}
	s := snap(t0.Add(2 * time.Second))
	rate(s, prev)
	got := s.Sink.AgentRows
	if got[0].Records != 10 || got[1].Records != 0 || got[2].Records != 0 || got[0].TotalRecords != 30 {
		t.Fatalf("rates %+v: want a 10/s, b 0 (its total went down: the sink restarted), c 0 (new)", got)
	}
	if !got[1].LastSeen.Equal(s.Time) || !got[0].LastSeen.Equal(left) || got[0].Connected || !got[1].Connected || got[1].Identity != "token" {
		t.Fatalf("rows %+v: a connected agent is seen now, a gone one when it left", got)
	}
	// Other kinds have no sink section: the provider leaves them alone.
	a := &Snapshot{Agent: &AgentStatus{}, Errors: &Errors{}}
	AgentRows(list)(a)
	at := time.Unix(200, 0)
	LastError(func() (string, time.Time) { return "Unavailable: sink down", at })(a)
	if a.Sink != nil || a.Errors.Last != "Unavailable: sink down" || !a.Errors.LastAt.Equal(at) {
		t.Fatalf("agent snapshot %+v, errors %+v", a, a.Errors)
	}
}
