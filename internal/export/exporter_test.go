package export

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluicehq/sluice/internal/store/seglogstore"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// waitAccepted waits until rc has accepted n requests and returns them.
func waitAccepted(t *testing.T, rc *receiver, n int) []request {
	t.Helper()
	testwait.For(t, fmt.Sprintf("%d requests accepted", n), func() bool { return len(rc.accepted()) >= n })
	return rc.accepted()
}

// A remote-write exporter forwards the remote-write records of the store,
// in store order and record order, snappy-compressed with remote-write
// 1.0's headers, and nothing else (plain records, OTLP); it follows what
// is stored after it caught up, and commits its position.
func TestExporterRemoteWriteInOrder(t *testing.T) {
	st := openStore(t, t.TempDir())
	rc := newReceiver(t)
	var want [][]byte
	rw := func(i int) []byte {
		b := writeRequest("up", fmt.Sprint("job-", i), float64(i), int64(1000+i))
		want = append(want, b)
		return marked(telemetry.RemoteWrite, b)
	}
	st.add([]byte("a plain record"), rw(0), marked(telemetry.OTLPLogs, []byte{}), rw(1))
	st.add([]byte("plain only"))
	st.add(rw(2))
	x := startExporter(t, st, rc.target(t, RemoteWrite))
	waitAccepted(t, rc, 3)
	st.add(rw(3), []byte("plain"), rw(4)) // after it caught up
	got := waitAccepted(t, rc, 5)
	if len(got) != len(want) {
		t.Fatalf("%d requests, want %d: %v", len(got), len(want), got)
	}
	for i, r := range got {
		if !bytes.Equal(r.body, want[i]) {
			t.Errorf("request %d: body %q, want %q", i, r.body, want[i])
		}
		if r.path != "/api/v1/write" || r.contentType != "application/x-protobuf" || r.encoding != "snappy" || r.version != "0.1.0" {
			t.Errorf("request %d: path %q, Content-Type %q, Content-Encoding %q, version %q", i, r.path, r.contentType, r.encoding, r.version)
		}
	}
	testwait.For(t, "the position committed at the end of the store", func() bool {
		pos, ok, _ := st.st.Committed(x.e.cfg.Target.Group())
		return ok && pos == st.st.NextOffset()
	})
	if st := x.e.Status(); st.Requests != 5 || st.Lag != 0 || st.Poison != 0 {
		t.Errorf("status %+v, want 5 requests, no lag, no poison", st)
	}
}

// An OTLP exporter posts each signal's records to URL/v1/metrics,
// /v1/logs and /v1/traces, as stored (uncompressed protobuf), in order.
func TestExporterOTLPPaths(t *testing.T) {
	st := openStore(t, t.TempDir())
	rc := newReceiver(t)
	st.add(marked(telemetry.OTLPMetrics, []byte("m1")), marked(telemetry.RemoteWrite, writeRequest("x", "y", 1, 1)),
		marked(telemetry.OTLPLogs, []byte("l1")), marked(telemetry.OTLPTraces, []byte("t1")))
	st.add(marked(telemetry.OTLPMetrics, []byte("m2")))
	startExporter(t, st, rc.target(t, OTLP))
	got := waitAccepted(t, rc, 4)
	want := []string{"/otlp/v1/metrics m1", "/otlp/v1/logs l1", "/otlp/v1/traces t1", "/otlp/v1/metrics m2"}
	for i, r := range got {
		if s := r.path + " " + string(r.body); i >= len(want) || s != want[i] || r.contentType != "application/x-protobuf" || r.encoding != "" {
			t.Errorf("request %d: %s (Content-Type %q, Content-Encoding %q), want %s", i, s, r.contentType, r.encoding, want[i])
		}
	}
}

// A receiver answering 503 and 429 (with Retry-After) has the same
// request sent again until it takes it; nothing is skipped, the order
// holds, and the failures are counted as retried.
func TestExporterRetriesUnavailable(t *testing.T) {
	st := openStore(t, t.TempDir())
	rc := newReceiver(t)
	rc.answer = func(n int, r request) reply {
		switch n {
		case 1:
			return reply{status: http.StatusServiceUnavailable}
		case 2:
			return reply{status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {"1"}}}
		}
		return reply{status: http.StatusOK}
	}
	st.add(marked(telemetry.OTLPLogs, []byte("first")), marked(telemetry.OTLPLogs, []byte("second")))
	x := startExporter(t, st, rc.target(t, OTLP))
	got := waitAccepted(t, rc, 2)
	if string(got[0].body) != "first" || string(got[1].body) != "second" {
		t.Fatalf("accepted %v, want first then second", got)
	}
	if n := x.errors(reasonRetried); n != 2 {
		t.Errorf("retried %v times, want 2", n)
	}
	if n := x.errors(reasonPoison); n != 0 {
		t.Errorf("poison %v, want 0", n)
	}
	if st := x.e.Status(); st.Failing || st.Requests != 2 {
		t.Errorf("status %+v: want not failing, 2 requests", st)
	}
}

// A record the receiver refuses with a 400 is a poison record: sent
// once, counted, skipped; the records after it go out.
func TestExporterSkipsPoison(t *testing.T) {
	st := openStore(t, t.TempDir())
	rc := newReceiver(t)
	var poisonTries int
	rc.answer = func(n int, r request) reply {
		if string(r.body) == "poison" {
			poisonTries++
			return reply{status: http.StatusBadRequest}
		}
		return reply{status: http.StatusOK}
	}
	st.add(marked(telemetry.OTLPTraces, []byte("before")), marked(telemetry.OTLPTraces, []byte("poison")))
	st.add(marked(telemetry.OTLPTraces, []byte("after")))
	x := startExporter(t, st, rc.target(t, OTLP))
	got := waitAccepted(t, rc, 2)
	if string(got[0].body) != "before" || string(got[1].body) != "after" {
		t.Fatalf("accepted %v, want before, after", got)
	}
	rc.mu.Lock()
	tries := poisonTries
	rc.mu.Unlock()
	if tries != 1 || x.errors(reasonPoison) != 1 || x.errors(reasonRetried) != 0 {
		t.Errorf("poison sent %d times, counted %v poison and %v retried; want 1, 1, 0", tries, x.errors(reasonPoison), x.errors(reasonRetried))
	}
	if st := x.e.Status(); st.Poison != 1 || st.LastError == "" {
		t.Errorf("status %+v: want 1 poison and the error in words", st)
	}
}

// However much the store holds ahead, an exporter has one request in
// flight: it reads the next record only once the receiver answered the
// last one (its memory is one read chunk, one message, one request).
func TestExporterOneRequestInFlight(t *testing.T) {
	st := openStore(t, t.TempDir())
	rc := newReceiver(t)
	release := make(chan struct{})
	rc.block = release
	for i := range 50 {
		st.add(marked(telemetry.OTLPMetrics, fmt.Appendf(nil, "m%d", i)), marked(telemetry.OTLPMetrics, fmt.Appendf(nil, "n%d", i)))
	}
	x := startExporter(t, st, rc.target(t, OTLP))
	testwait.For(t, "the first request to reach the receiver", func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return rc.attempts == 1
	})
	if st := x.e.Status(); st.Position != 0 || st.Lag != 50 {
		t.Errorf("while the first request is held: status %+v, want position 0, lag 50", st)
	}
	rc.mu.Lock()
	rc.block = nil
	rc.mu.Unlock()
	close(release)
	got := waitAccepted(t, rc, 100)
	rc.mu.Lock()
	maxIn := rc.maxInFlight
	rc.mu.Unlock()
	if maxIn != 1 {
		t.Errorf("%d requests in flight at once, want 1", maxIn)
	}
	for i, r := range got {
		want := fmt.Sprintf("m%d", i/2)
		if i%2 == 1 {
			want = fmt.Sprintf("n%d", i/2)
		}
		if string(r.body) != want {
			t.Fatalf("request %d: %q, want %q", i, r.body, want)
		}
	}
}

// An exporter stopped and started again over the same store (the sink
// restarted) resumes at its committed position: what it had sent is not
// sent again, what was stored meanwhile goes out.
func TestExporterResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	rc := newReceiver(t)
	tg := rc.target(t, OTLP)
	st.add(marked(telemetry.OTLPLogs, []byte("1")), marked(telemetry.OTLPLogs, []byte("2")))
	x := startExporter(t, st, tg)
	waitAccepted(t, rc, 2)
	if err := x.stop(); err != nil {
		t.Fatal(err)
	}
	if err := st.st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, dir)
	st.add(marked(telemetry.OTLPLogs, []byte("3")))
	startExporter(t, st, tg)
	got := waitAccepted(t, rc, 3)
	var bodies []string
	for _, r := range got {
		bodies = append(bodies, string(r.body))
	}
	if fmt.Sprint(bodies) != "[1 2 3]" {
		t.Fatalf("accepted %v, want [1 2 3]", bodies)
	}
}

// A marked record of a version this build does not read, and a stored
// message whose records cannot be unpacked, are counted as unreadable
// and skipped; what follows goes out.
func TestExporterSkipsUnreadable(t *testing.T) {
	st := openStore(t, t.TempDir())
	rc := newReceiver(t)
	bad := marked(telemetry.OTLPLogs, []byte("x"))
	bad[len(telemetry.Magic)] = 99 // a future version
	st.add(bad, marked(telemetry.OTLPLogs, []byte("ok")))
	x := startExporter(t, st, rc.target(t, OTLP))
	got := waitAccepted(t, rc, 1)
	if string(got[0].body) != "ok" || x.errors(reasonUnreadable) != 1 {
		t.Fatalf("accepted %v, unreadable %v; want ok and 1", got, x.errors(reasonUnreadable))
	}
}

// Remote-write records in the agent's columnar encoding
// (telemetry.AppendRemoteWrite) go out as the WriteRequest the agent
// received, byte for byte (a stale marker's NaN bits included); a
// damaged one — cut short, as a torn or forged record would be — is
// counted as unreadable and skipped, and what follows goes out.
func TestExporterForwardsEncodedRemoteWrite(t *testing.T) {
	st := openStore(t, t.TempDir())
	rc := newReceiver(t)
	// A scrape's worth of series: one alone would be smaller as protobuf.
	scrape := func(v float64, ts int64) []byte {
		var req []byte
		for i := range 20 {
			req = append(req, writeRequest("up", fmt.Sprint("job-", i), v, ts)...)
		}
		return req
	}
	first, last := scrape(1.5, 1000), scrape(math.Float64frombits(0x7ff0000000000002), 2000)
	enc := func(body []byte) []byte {
		rec := telemetry.AppendRemoteWrite(nil, body)
		if telemetry.Kind(rec[len(telemetry.Magic)+1]) != telemetry.RemoteWriteColumns {
			t.Fatalf("record %x not in the columnar encoding", rec)
		}
		return rec
	}
	damaged := enc(scrape(3, 3000))
	st.add(enc(first), damaged[:len(damaged)-3], enc(last))
	x := startExporter(t, st, rc.target(t, RemoteWrite))
	got := waitAccepted(t, rc, 2)
	if len(got) != 2 || !bytes.Equal(got[0].body, first) || !bytes.Equal(got[1].body, last) {
		t.Fatalf("accepted %v, want %q then %q", got, first, last)
	}
	testwait.For(t, "the damaged record counted unreadable", func() bool { return x.errors(reasonUnreadable) == 1 })
}

// A receiver that is down (every connection to its port cut at once,
// before a byte of an answer) has the request retried until it serves
// again; nothing is lost. The port stays bound throughout (downListener):
// freeing it and binding it again let another test take it meanwhile.
func TestExporterRetriesUnreachableReceiver(t *testing.T) {
	st := openStore(t, t.TempDir())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := &downListener{Listener: lis, down: true}
	u, _ := url.Parse("http://" + lis.Addr().String())
	st.add(marked(telemetry.OTLPMetrics, []byte("while down")))
	rc := &receiver{}
	srv := &http.Server{Handler: http.HandlerFunc(rc.serve)}
	go srv.Serve(down)
	t.Cleanup(func() { srv.Close() })
	x := startExporter(t, st, Target{Protocol: OTLP, URL: u})
	testwait.For(t, "a failed attempt", func() bool { return x.errors(reasonRetried) >= 1 })
	if st := x.e.Status(); !st.Failing || st.LastError == "" {
		t.Errorf("status while down %+v: want failing with the error", st)
	}
	down.up()
	got := waitAccepted(t, rc, 1)
	if string(got[0].body) != "while down" {
		t.Fatalf("accepted %v", got)
	}
}

// downListener closes every connection it accepts while down, as a
// receiver whose process is gone but whose port answers (a load balancer
// with no backend); up lets connections through.
type downListener struct {
	net.Listener
	mu   sync.Mutex
	down bool
}

func (l *downListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		down := l.down
		l.mu.Unlock()
		if !down {
			return c, nil
		}
		c.Close()
	}
}

func (l *downListener) up() {
	l.mu.Lock()
	l.down = false
	l.mu.Unlock()
}

// failingCommits is a store whose first commits fail (a disk error).
type failingCommits struct {
	*seglogstore.Store
	mu    sync.Mutex
	fails int
}

func (f *failingCommits) Commit(group string, pos uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails > 0 {
		f.fails--
		return errors.New("injected: no space left on device")
	}
	return f.Store.Commit(group, pos)
}

// A store that fails under the exporter (a commit refused) does not stop
// it: the failure is counted and shown, and the exporter starts again
// from its committed position, so the records go out (some twice: at
// least once) and the position is committed in the end.
func TestExporterSurvivesStoreFailure(t *testing.T) {
	st := openStore(t, t.TempDir())
	fc := &failingCommits{Store: st.st, fails: 2}
	rc := newReceiver(t)
	st.add(marked(telemetry.OTLPLogs, []byte("a")))
	x := startExporterOn(t, fc, st.dir, rc.target(t, OTLP))
	testwait.For(t, "the position committed", func() bool {
		pos, ok, _ := st.st.Committed(x.e.cfg.Target.Group())
		return ok && pos == st.st.NextOffset()
	})
	if n := x.errors(reasonStore); n != 2 {
		t.Errorf("store failures counted %v, want 2", n)
	}
	st.add(marked(telemetry.OTLPLogs, []byte("b")))
	got := waitAccepted(t, rc, 4)
	var bodies []string
	for _, r := range got {
		bodies = append(bodies, string(r.body))
	}
	if fmt.Sprint(bodies) != "[a a a b]" {
		t.Errorf("accepted %v, want a three times (sent again after each failed commit), then b", bodies)
	}
}

// An OTLP receiver that takes a request but rejects part of it (200 with
// partial_success) has it counted and not sent again, as OTLP/HTTP says;
// the export goes on.
func TestExporterCountsPartialSuccess(t *testing.T) {
	st := openStore(t, t.TempDir())
	rc := newReceiver(t)
	var ps []byte
	ps = protowire.AppendTag(ps, 1, protowire.VarintType)
	ps = protowire.AppendVarint(ps, 3)
	ps = protowire.AppendTag(ps, 2, protowire.BytesType)
	ps = protowire.AppendString(ps, "3 spans without a trace id")
	answer := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), ps)
	rc.answer = func(n int, r request) reply {
		if string(r.body) == "partly bad" {
			return reply{status: http.StatusOK, header: http.Header{"Content-Type": {"application/x-protobuf"}}, body: answer}
		}
		return reply{status: http.StatusOK}
	}
	st.add(marked(telemetry.OTLPTraces, []byte("partly bad")), marked(telemetry.OTLPTraces, []byte("good")))
	x := startExporter(t, st, rc.target(t, OTLP))
	got := waitAccepted(t, rc, 2)
	if string(got[0].body) != "partly bad" || string(got[1].body) != "good" {
		t.Fatalf("accepted %v", got)
	}
	var m dto.Metric
	if err := x.e.cfg.Metrics.rejected.WithLabelValues(x.e.name).Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.GetCounter().GetValue() != 3 || x.errors(reasonRetried) != 0 {
		t.Errorf("rejected items %v, retried %v; want 3 and 0", m.GetCounter().GetValue(), x.errors(reasonRetried))
	}
	if st := x.e.Status(); !strings.Contains(st.LastError, "3 spans without a trace id") || st.Failing {
		t.Errorf("status %+v: want the rejection in words, not failing", st)
	}
}
