package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/testkit/faultproxy"
	"github.com/sluicehq/sluice/internal/testkit/testskip"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// These tests run `sluice sink --export` as a process against receivers:
// a real Prometheus with its remote-write receiver, and an httptest OTLP
// receiver across a SIGKILL of the sink. Records go in through the Go
// client's embedded agent: the agent's own remote-write and OTLP
// receivers are another part of issue 28.

// remoteWriteRequest is a remote-write 1.0 WriteRequest (protobuf) of one
// series name{labels...} with one sample v at ts (ms).
func remoteWriteRequest(name string, labels []string, v float64, ts int64) []byte {
	var series []byte
	pairs := append([]string{"__name__", name}, labels...)
	for i := 0; i+1 < len(pairs); i += 2 {
		var l []byte
		l = protowire.AppendTag(l, 1, protowire.BytesType)
		l = protowire.AppendString(l, pairs[i])
		l = protowire.AppendTag(l, 2, protowire.BytesType)
		l = protowire.AppendString(l, pairs[i+1])
		series = protowire.AppendTag(series, 1, protowire.BytesType)
		series = protowire.AppendBytes(series, l)
	}
	var smp []byte
	smp = protowire.AppendTag(smp, 1, protowire.Fixed64Type)
	smp = protowire.AppendFixed64(smp, math.Float64bits(v))
	smp = protowire.AppendTag(smp, 2, protowire.VarintType)
	smp = protowire.AppendVarint(smp, uint64(ts))
	series = protowire.AppendTag(series, 2, protowire.BytesType)
	series = protowire.AppendBytes(series, smp)
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), series)
}

// newProducer is the Go client's embedded agent delivering to sinkAddr.
func newProducer(t *testing.T, sinkAddr string) *client.Producer {
	t.Helper()
	p, err := client.NewProducer(client.SinkAddrs(sinkAddr), client.SpoolDir(filepath.Join(t.TempDir(), "spool")),
		client.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestExportRemoteWriteToPrometheus: remote-write records delivered
// through an agent into a sink with --export remote-write=URL come out
// in a real Prometheus (its remote-write receiver), where its query API
// finds the series with its labels and value; `sluice consume` shows the
// same record as an exposition line.
func TestExportRemoteWriteToPrometheus(t *testing.T) {
	dir := t.TempDir()
	promAddr := startPrometheus(t, dir)

	sinkAddr, metricsAddr := freeAddr(t), freeAddr(t)
	start(t, "sink", "sink", "--listen", sinkAddr, "--data", filepath.Join(dir, "sink"), "--metrics", metricsAddr,
		"--export", "remote-write=http://"+promAddr+"/api/v1/write")
	p := newProducer(t, sinkAddr)
	marker := strconv.FormatInt(time.Now().UnixNano(), 36)
	ts := time.Now().UnixMilli()
	req := remoteWriteRequest("sluice_export_e2e", []string{"marker", marker, "job", "e2e"}, 42.5, ts)
	if err := p.Produce(context.Background(), telemetry.Append(nil, telemetry.RemoteWrite, req), []byte("a plain record")); err != nil {
		t.Fatal(err)
	}
	query := "http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(`sluice_export_e2e{marker="`+marker+`"}`)
	var got string
	testwait.For(t, "the series in prometheus", func() bool {
		got = promValue(query)
		return got != ""
	})
	if got != "42.5" {
		t.Errorf("prometheus has value %q, want 42.5", got)
	}
	// The metrics say the same: one request taken, no lag (the exporter
	// counts just after the receiver answered: wait for it).
	exporter := `exporter="remote-write=http://` + promAddr + `/api/v1/write"`
	testwait.For(t, "sluice_export_requests_total 1 and sluice_export_lag_messages 0", func() bool {
		return labelled(metricsAddr, `sluice_export_requests_total{`+exporter+`}`) == 1 &&
			labelled(metricsAddr, `sluice_export_lag_messages{`+exporter+`}`) == 0
	})
	out, err := exec.Command(sluiceBin, "consume", "--sink", sinkAddr).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`sluice_export_e2e{marker=%q,job="e2e"} 42.5 %d`, marker, ts) + "\na plain record\n"
	if string(out) != want {
		t.Errorf("consume printed\n%s\nwant\n%s", out, want)
	}
	// --raw prints the record as stored.
	raw, err := exec.Command(sluiceBin, "consume", "--sink", sinkAddr, "--raw").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := string(telemetry.Append(nil, telemetry.RemoteWrite, req)) + "\na plain record\n"; string(raw) != want {
		t.Errorf("consume --raw printed %q, want %q", raw, want)
	}
}

// startPrometheus starts Debian's prometheus as a remote-write receiver
// on loopback (field notes §5), its TSDB under dir, and returns its
// address once it is ready.
func startPrometheus(t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("prometheus"); err != nil {
		testskip.Missing(t, "SLUICE_PROMETHEUS", "prometheus", "prometheus is not installed (bash scripts/install-prometheus.sh)")
	}
	promAddr := freeAddr(t)
	prom := exec.Command("prometheus", "--config.file=/dev/null", "--storage.tsdb.path="+filepath.Join(dir, "prom"),
		"--web.listen-address="+promAddr, "--web.enable-remote-write-receiver")
	var promLog strings.Builder
	var promMu sync.Mutex
	prom.Stdout, prom.Stderr = lockedWriter{&promMu, &promLog}, lockedWriter{&promMu, &promLog}
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		prom.Process.Kill()
		prom.Wait()
		if t.Failed() {
			promMu.Lock()
			t.Logf("prometheus said:\n%s", promLog.String())
			promMu.Unlock()
		}
	})
	testwait.For(t, "prometheus ready", func() bool { return httpStatus("http://"+promAddr+"/-/ready") == http.StatusOK })

	return promAddr
}

// lockedWriter serializes a child's stdout and stderr into one builder.
type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// httpStatus is the status of a GET, 0 when it fails.
func httpStatus(u string) int {
	resp, err := http.Get(u)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// promValue is the value of the first series of an instant query's
// answer, "" when there is none (yet).
func promValue(u string) string {
	resp, err := http.Get(u)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var ans struct {
		Data struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&ans) != nil || len(ans.Data.Result) == 0 || len(ans.Data.Result[0].Value) != 2 {
		return ""
	}
	s, _ := ans.Data.Result[0].Value[1].(string)
	return s
}

// otlpReceiver records the bodies of the OTLP/HTTP log requests it gets.
type otlpReceiver struct {
	mu     sync.Mutex
	bodies []string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/logs" {
		http.Error(w, "not here", http.StatusNotFound)
		return
	}
	o.mu.Lock()
	o.bodies = append(o.bodies, string(b))
	o.mu.Unlock()
}

func (o *otlpReceiver) got() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.bodies...)
}

// TestExportSurvivesSinkKill: records go through an agent into a sink
// with --export otlp=URL while the sink is SIGKILLed and restarted,
// twice: every record reaches the receiver (at least once), and the
// first arrival of each is in the order they were produced; what came
// twice is what the killed exporter had sent after its last commit.
func TestExportSurvivesSinkKill(t *testing.T) {
	rc := &otlpReceiver{}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	sinkAddr := freeAddr(t)
	sink := start(t, "sink", "sink", "--listen", sinkAddr, "--data", filepath.Join(dir, "sink"), "--export", "otlp="+srv.URL)
	p := newProducer(t, sinkAddr)
	const rounds, perRound, perCall = 3, 400, 20
	n := 0
	for round := range rounds {
		n = produceOTLPLogs(t, p, n, perRound, perCall)
		if round < rounds-1 {
			at := len(rc.got())
			testwait.For(t, "the exporter to send more", func() bool { return len(rc.got()) > at })
			sink.restart() // SIGKILL mid-export, start again
		}
	}
	testwait.For(t, "every record exported", func() bool { return firstSeen(rc.got()) >= n })
	got := rc.got()
	firstArrivalsInOrder(t, got, n)
	t.Logf("%d records, %d requests: %d sent again after the kills", n, len(got), len(got)-n)
}

// firstSeen counts the distinct bodies in got.
func firstSeen(got []string) int {
	seen := make(map[string]bool, len(got))
	for _, b := range got {
		seen[b] = true
	}
	return len(seen)
}

// --export values the sink cannot use are refused before it opens its
// store: exit 2 with what is wrong.
func TestSinkExportFlagErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--export", "statsd=http://127.0.0.1:1"}, `unknown protocol "statsd"`},
		{[]string{"--export", "otlp=ftp://127.0.0.1:1"}, "http:// or https://"},
		{[]string{"--export", "otlp=http://127.0.0.1:1", "--export", "otlp=http://127.0.0.1:1"}, "given twice"},
		{[]string{"--export", "otlp=http://127.0.0.1:1", "--store", "kafka://127.0.0.1:9092/t"}, "--export needs the embedded store"},
	} {
		args := append([]string{"sink", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "d")}, c.args...)
		code, out, errOut := run(args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("sluice %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", args, code, out, errOut, c.want)
		}
	}
}

// labelled reads one series (name{labels} as exposed) from a Prometheus
// endpoint, -1 when it is not there.
func labelled(addr, series string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// TestExportRemoteWriteSurvivesSinkKill: remote-write records of one
// series, one sample each in time order, go through an agent into a sink
// with --export remote-write=URL of a real Prometheus while the sink is
// SIGKILLed and restarted twice: Prometheus ends up with every sample.
// What the killed exporter sends again, Prometheus already has: it takes
// the last request again (the same samples) and refuses the older ones
// as out of order (400), which the exporter counts as poison and skips.
func TestExportRemoteWriteSurvivesSinkKill(t *testing.T) {
	dir := t.TempDir()
	promAddr := startPrometheus(t, dir)
	sinkAddr := freeAddr(t)
	sink := start(t, "sink", "sink", "--listen", sinkAddr, "--data", filepath.Join(dir, "sink"),
		"--export", "remote-write=http://"+promAddr+"/api/v1/write")
	p := newProducer(t, sinkAddr)
	marker := strconv.FormatInt(time.Now().UnixNano(), 36)
	query := "http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(`count_over_time(sluice_export_kill{marker="`+marker+`"}[1h])`)
	const rounds, perRound, perCall = 3, 200, 10
	start := time.Now().Add(-time.Duration(rounds*perRound) * 100 * time.Millisecond).UnixMilli()
	n := 0
	for round := range rounds {
		// Counted before the round is produced: the exporter may deliver
		// the whole round before the produce loop ends, and a count read
		// after it would then wait for samples that never come (a CI run
		// waited its 2 minutes so).
		at, _ := strconv.Atoi(promValue(query))
		for range perRound / perCall {
			recs := make([][]byte, perCall)
			for i := range recs {
				req := remoteWriteRequest("sluice_export_kill", []string{"marker", marker}, float64(n), start+int64(n)*100)
				recs[i] = telemetry.Append(nil, telemetry.RemoteWrite, req)
				n++
			}
			if err := p.Produce(context.Background(), recs...); err != nil {
				t.Fatal(err)
			}
		}
		if round < rounds-1 {
			testwait.For(t, "prometheus to get more samples", func() bool {
				got, _ := strconv.Atoi(promValue(query))
				return got > at
			})
			sink.restart() // SIGKILL mid-export, start again
		}
	}
	var got string
	testwait.For(t, "every sample in prometheus", func() bool {
		got = promValue(query)
		return got == strconv.Itoa(n)
	})
}

// TestExportChaos: OTLP records go producer → agent → sink → receiver,
// real agent and sink processes, while both links (agent to sink, sink
// to receiver) are reset every 300 ms and the agent and the sink are each
// SIGKILLed twice mid-run: every record produced reaches the receiver,
// the first arrival of each in the order produced; only the exporter's
// re-sends after a kill or a cut answer come twice (at least once).
func TestExportChaos(t *testing.T) {
	rc := &otlpReceiver{}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	toRecv := faultproxy.New(t, srv.Listener.Addr().String())
	dir := t.TempDir()
	sinkAddr, ingestAddr := freeAddr(t), freeAddr(t)
	toSink := faultproxy.New(t, sinkAddr)
	sink := start(t, "sink", "sink", "--listen", sinkAddr, "--data", filepath.Join(dir, "sink"), "--export", "otlp=http://"+toRecv.Addr())
	ag := start(t, "agent", "agent", "--sink", toSink.Addr(), "--spool", filepath.Join(dir, "spool"), "--ingest", ingestAddr,
		"--max-message", "4KiB", "--min-rto", "200ms", "--reconnect-max", "200ms")
	listening(t, ingestAddr)
	stop := make(chan struct{})
	resetsDone := make(chan int)
	go func() {
		resets := 0
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				resetsDone <- resets
				return
			case <-tick.C:
				toSink.ResetAll()
				toRecv.ResetAll()
				resets++
			}
		}
	}()
	p, err := client.NewHTTPProducer(ingestAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	const parts, perPart, perCall = 5, 600, 20
	n := 0
	for part := range parts {
		n = produceOTLPLogs(t, p, n, perPart, perCall)
		at := len(rc.got())
		testwait.For(t, fmt.Sprintf("part %d: the exporter to send more", part), func() bool { return len(rc.got()) > at })
		// Both links cut while in use, besides the ticker's resets.
		toSink.ResetAll()
		toRecv.ResetAll()
		switch part {
		case 0, 2:
			ag.restart()
		case 1, 3:
			sink.restart()
		}
	}
	testwait.For(t, "every record exported", func() bool { return firstSeen(rc.got()) >= n })
	close(stop)
	resets := <-resetsDone
	got := rc.got()
	firstArrivalsInOrder(t, got, n)
	if toSink.Cuts() == 0 || toRecv.Cuts() == 0 {
		t.Errorf("connections cut: %d agent to sink, %d sink to receiver; want both links cut while in use", toSink.Cuts(), toRecv.Cuts())
	}
	t.Logf("%d records, %d requests (%d sent again), %d timed resets, %d + %d connections cut", n, len(got), len(got)-n, resets,
		toSink.Cuts(), toRecv.Cuts())
}

// produceOTLPLogs produces count OTLP log records "log-NNNNN" numbered
// from `from`, perCall in each Produce call, through p (an agent's
// producer or its HTTP ingest), and returns the next number.
func produceOTLPLogs(t *testing.T, p interface {
	Produce(context.Context, ...[]byte) error
}, from, count, perCall int) int {
	t.Helper()
	n := from
	for range count / perCall {
		recs := make([][]byte, perCall)
		for i := range recs {
			recs[i] = telemetry.Append(nil, telemetry.OTLPLogs, fmt.Appendf(nil, "log-%05d", n))
			n++
		}
		if err := p.Produce(context.Background(), recs...); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// firstArrivalsInOrder fails the test unless the first arrival of each
// of the n records "log-NNNNN" in got comes in the order produced (what
// came again after a kill or a cut may come anywhere).
func firstArrivalsInOrder(t *testing.T, got []string, n int) {
	t.Helper()
	next := 0
	for _, b := range got {
		if b == fmt.Sprintf("log-%05d", next) {
			next++
		}
	}
	if next != n {
		t.Fatalf("first arrivals out of order: in order up to %d of %d", next, n)
	}
}
