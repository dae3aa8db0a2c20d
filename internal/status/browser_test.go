package status

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/export"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/sinktest"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
)

// listenRetry listens on addr, retrying while a just-closed listener of a
// restarted daemon still holds it (bounded: 100 tries).
func listenRetry(t *testing.T, addr string) net.Listener {
	t.Helper()
	var err error
	for range 100 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("listen %s: %v", addr, err)
	return nil
}

// daemon is an in-process sink or agent with its status page served the
// way serveMetrics serves it.
type daemon struct {
	httpAddr string
	srv      *http.Server
	cancel   context.CancelFunc
	stop     func()
}

func servePage(t *testing.T, addr string, cfg Config) *daemon {
	t.Helper()
	ln := listenRetry(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.Handle("/", Handler(ctx, cfg))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return &daemon{httpAddr: ln.Addr().String(), srv: srv, cancel: cancel}
}

// close stops the page (its RSocket connections end, as when the process
// exits) and then the daemon.
func (d *daemon) close() {
	d.cancel()
	d.srv.Close()
	if d.stop != nil {
		d.stop()
	}
}

func startSink(t *testing.T, dir, grpcAddr, httpAddr string) (*daemon, string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s := sinktest.Start(t, sink.Config{DataDir: dir, Registry: reg, Logger: quiet}, grpcAddr)
	d := servePage(t, httpAddr, Config{Kind: KindSink, Gatherer: reg, Ready: s.Ready,
		Providers: []Provider{StoreSize(s.Store().Dir()), AgentRows(s.Agents), LastError(s.LastError), Exporters(oneExporter)}})
	d.stop = s.Stop
	return d, s.Addr
}

// oneExporter is a sink's exporter whose receiver is failing, for the
// page's exporter rows.
func oneExporter() []export.Status {
	return []export.Status{{Name: "otlp=http://127.0.0.1:4318", Position: 3, Lag: 2, Requests: 5, Failing: true, LastError: "503 Service Unavailable"}}
}

// consoleLog collects what the pages report as errors.
type consoleLog struct {
	mu       sync.Mutex
	errs     []string
	expected []string // the browser's own reports of refused reconnects while the sink is down
}

func (l *consoleLog) event(m cdpMsg) {
	var what string
	switch m.Method {
	case "Runtime.exceptionThrown":
		what = "exception: " + string(m.Params)
	case "Runtime.consoleAPICalled":
		if strings.Contains(string(m.Params), `"type":"error"`) || strings.Contains(string(m.Params), `"type":"assert"`) {
			what = "console: " + string(m.Params)
		}
	case "Log.entryAdded":
		if strings.Contains(string(m.Params), `"level":"error"`) {
			what = "log: " + string(m.Params)
		}
	}
	if what == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// A WebSocket the browser could not open while the daemon restarts is
	// the reconnect loop working, reported by the browser itself.
	if m.Method == "Log.entryAdded" && strings.Contains(what, `"source":"network"`) && strings.Contains(what, "/rsocket") {
		l.expected = append(l.expected, what)
		return
	}
	l.errs = append(l.errs, what)
}

// TestBrowserStatusPage drives the page in headless Chromium as a person
// would: a sink's page shows live numbers, says "reconnecting…" while the
// sink restarts and shows live numbers again; an agent's page with tokens
// asks for one, says clearly that a bad one was refused, and goes live
// with a good one; a click opens details. No console errors.
func TestBrowserStatusPage(t *testing.T) {
	findChromium(t) // skips before starting anything when there is none
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()

	sd, grpcAddr := startSink(t, filepath.Join(dir, "sink"), "127.0.0.1:0", "127.0.0.1:0")
	sinkHTTP := sd.httpAddr
	defer func() { sd.close() }()

	areg := prometheus.NewRegistry()
	a, err := agent.New(agent.Config{SinkAddr: grpcAddr, SpoolDir: filepath.Join(dir, "spool"), Registry: areg, Logger: quiet,
		Linger: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := auth.ParseTokens(strings.NewReader(readerToken + " operator\n"))
	if err != nil {
		t.Fatal(err)
	}
	ad := servePage(t, "127.0.0.1:0", Config{Kind: KindAgent, Gatherer: areg, Ready: a.Ready, Tokens: toks,
		Providers: []Provider{SpoolQuota(defaults.SpoolQuota), LastError(a.LastError)}})
	defer ad.close()

	// A steady trickle of records, like a small demo: 50 records of about
	// 100 bytes every 20 ms.
	feedCtx, stopFeed := context.WithCancel(ctx)
	var feeding sync.WaitGroup
	feeding.Add(1)
	go func() {
		defer feeding.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		recs := make([][]byte, 50)
		for n := 0; ; n++ {
			for i := range recs {
				recs[i] = fmt.Appendf(nil, `{"host":"h%d","metric":"cpu","seq":%d,"value":%d.5,"pad":"................................"}`, i, n, n%100)
			}
			if err := a.Ingest(feedCtx, recs); err != nil && feedCtx.Err() != nil {
				return
			}
			select {
			case <-feedCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { stopFeed(); feeding.Wait(); a.Close() }()

	var console consoleLog
	b := startBrowser(ctx, t, console.event)
	sink, err := b.newTab(ctx, 1280, 900)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.navigate(ctx, "http://"+sinkHTTP+"/"); err != nil {
		t.Fatal(err)
	}
	live := `sluiceStatus.conn === "live" && document.getElementById("conn").textContent === "live"`
	sink.waitFor(ctx, "the sink page live", live+` && sluiceStatus.snapshots >= 1`)
	var before float64
	if err := sink.eval(ctx, `sluiceStatus.last.throughput.totalRecords`, &before); err != nil {
		t.Fatal(err)
	}
	sink.waitFor(ctx, "the sink's numbers to move", fmt.Sprintf(`sluiceStatus.last.throughput.totalRecords > %v && sluiceStatus.last.throughput.records > 0 && !["–", "0"].includes(document.getElementById("rate-records").textContent)`, before))
	sink.waitFor(ctx, "readiness in words", `document.getElementById("ready").textContent.startsWith("Ready: taking messages")`)
	sink.waitFor(ctx, "the exporter's row", `document.querySelectorAll("#exporter-rows tr").length === 2 && document.querySelector("#exporter-rows tr:nth-child(2)").textContent.includes("RETRYING: 503")`)
	sink.waitFor(ctx, "the agent's row with its rate", `document.querySelectorAll("#agent-rows tr").length === 2 && document.querySelector("#agent-rows tr:nth-child(2)").textContent.includes("connected") && sluiceStatus.last.sink.agentRows[0].records > 0`)

	// Restart the sink: the page must say so and come back by itself.
	sd.close()
	sink.waitFor(ctx, `"reconnecting…" on the sink page`, `sluiceStatus.conn === "reconnecting" && document.getElementById("conn").textContent === "reconnecting…" && document.getElementById("banner").textContent.includes("reconnecting…")`)
	// A restart takes a while: let the page find the port closed twice.
	sink.waitFor(ctx, "two refused reconnects", `sluiceStatus.retries >= 2 && sluiceStatus.conn === "reconnecting"`)
	sd, _ = startSink(t, filepath.Join(dir, "sink"), grpcAddr, sinkHTTP)
	sink.waitFor(ctx, "the sink page live again with moving numbers", live+` && sluiceStatus.last.seq >= 2 && sluiceStatus.last.throughput.records > 0`)

	// The agent's page has tokens: it asks, refuses a bad one in words,
	// takes a good one.
	ag, err := b.newTab(ctx, 1280, 900)
	if err != nil {
		t.Fatal(err)
	}
	if err := ag.navigate(ctx, "http://"+ad.httpAddr+"/"); err != nil {
		t.Fatal(err)
	}
	authShown := `getComputedStyle(document.getElementById("auth")).display !== "none"`
	ag.waitFor(ctx, "the token prompt", authShown+` && document.getElementById("auth-error").textContent === "This daemon requires a token: this daemon requires a token."`)
	submit := func(token string) {
		t.Helper()
		if err := ag.eval(ctx, fmt.Sprintf(`document.getElementById("token").value = %q; document.getElementById("auth").requestSubmit(); true`, token), nil); err != nil {
			t.Fatal(err)
		}
	}
	submit("wrong-token-0123456789")
	ag.waitFor(ctx, "a clear error for a bad token", authShown+` && document.getElementById("auth-error").textContent === "The daemon refused the token: token not valid." && document.getElementById("ready").textContent.includes("token not valid")`)
	submit(readerToken)
	ag.waitFor(ctx, "the agent page live", live+` && !`+authShown+` && sluiceStatus.last.agent.sinkUp && sluiceStatus.last.seq >= 3 && sluiceStatus.last.throughput.records > 0 && sluiceStatus.history.length >= 3`)
	ag.waitFor(ctx, "the agent's cards", `!document.getElementById("card-window").classList.contains("hidden") && document.getElementById("spool").textContent.includes("quota") && sluiceStatus.last.agent.oldestUnackedSeconds !== null && document.getElementById("oldest-unacked").textContent !== "not exposed"`)
	// The sink restart above cut the agent's stream: its last error stays
	// on the page after it reconnected.
	ag.waitFor(ctx, "the agent's last error in words", `sluiceStatus.last.errors.last !== "" && sluiceStatus.last.errors.lastAt !== undefined && document.getElementById("errors").textContent.includes(" ago)")`)

	// xfer serve's page: two partial uploads, one being written, with
	// their progress.
	xd := startXfer(t, filepath.Join(dir, "xfer"))
	defer xd.close()
	xf, err := b.newTab(ctx, 1280, 800)
	if err != nil {
		t.Fatal(err)
	}
	if err := xf.navigate(ctx, "http://"+xd.httpAddr+"/"); err != nil {
		t.Fatal(err)
	}
	xf.waitFor(ctx, "two uploads with progress bars", live+` && document.querySelectorAll("#uploads .bar > div").length === 2 && document.getElementById("uploads").textContent.includes("big.bin") && document.getElementById("uploads").textContent.includes("(40%)") && document.getElementById("uploads").textContent.includes("writing") && document.getElementById("uploads").textContent.includes("idle")`)

	// SLUICE_STATUS_HISTORY=N waits for N snapshots in the chart before
	// the screenshots (for docs/status-page.png; at most about a minute).
	if n := os.Getenv("SLUICE_STATUS_HISTORY"); n != "" {
		ag.waitFor(ctx, n+" snapshots in the chart", "sluiceStatus.history.length >= "+strconv.Quote(n)+" * 1")
	}
	artifacts := os.Getenv("SLUICE_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	for name, tb := range map[string]*tab{"status-agent.png": ag, "status-sink.png": sink, "status-xfer.png": xf} {
		png, err := tb.screenshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(artifacts, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", p, len(png))
	}

	// Details on click: status.detail over the same connection.
	if err := ag.eval(ctx, `document.getElementById("card-window").click(); true`, nil); err != nil {
		t.Fatal(err)
	}
	ag.waitFor(ctx, "the details of the window card", `document.getElementById("detail").style.display === "block" && document.getElementById("detail-body").textContent.includes("sluice_agent_window_messages")`)

	console.mu.Lock()
	defer console.mu.Unlock()
	if len(console.errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(console.errs, "\n"))
	}
	t.Logf("%d refused reconnects reported by the browser while the sink was down", len(console.expected))
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("out of time")
	}
}

// startXfer serves an xfer store's page with two partial uploads: big.bin
// 40% written and still held by its writer, small.bin 10% and released.
func startXfer(t *testing.T, dir string) *daemon {
	t.Helper()
	st, err := diskstore.Open(dir, diskstore.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, size, n int) xfer.BackendUpload {
		u, err := st.Begin(name, int64(size), nil, "", false)
		if err != nil {
			t.Fatal(err)
		}
		p := make([]byte, n)
		if _, err := u.Write(0, p, xfer.CRC32C(p)); err != nil {
			t.Fatal(err)
		}
		if err := u.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		return u
	}
	big := write("big.bin", 1<<20, 4<<20/10)
	write("small.bin", 1<<20, 1<<20/10).Release()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_xfer_received_bytes_total", Help: "Bytes written to partial uploads."},
		func() float64 { return float64(st.Stats.BytesReceived.Load()) }))
	d := servePage(t, "127.0.0.1:0", Config{Kind: KindXfer, Gatherer: reg, Providers: []Provider{Uploads(st)}})
	d.stop = func() { big.Release(); st.Close() }
	return d
}
