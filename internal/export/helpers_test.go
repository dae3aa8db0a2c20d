package export

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/seglogstore"
	"github.com/sluicehq/sluice/internal/telemetry"
)

// testStore is a real embedded store (the sink's seglog store) in dir,
// with an agent's message ids.
type testStore struct {
	t   testing.TB
	dir string
	st  *seglogstore.Store
	id  uint64
}

func openStore(t testing.TB, dir string) *testStore {
	t.Helper()
	st, _, err := seglogstore.Open(seglogstore.Options{DataDir: dir, MaxMessageBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s := &testStore{t: t, dir: dir, st: st, id: st.NextOffset()}
	t.Cleanup(func() { st.Close() })
	return s
}

// add stores one message holding recs, as the sink's writer does.
func (s *testStore) add(recs ...[]byte) {
	s.t.Helper()
	var b batch.Builder
	for _, r := range recs {
		if err := b.Add(r); err != nil {
			s.t.Fatal(err)
		}
	}
	s.id++
	m := &store.Message{Agent: "agent-1", AgentB: []byte("agent-1"), ID: s.id, Codec: codec.Plain,
		Records: uint32(len(recs)), Body: append([]byte(nil), b.Bytes()...), Acks: store.NewAcks()}
	if _, err := s.st.Append([]*store.Message{m}); err != nil {
		s.t.Fatal(err)
	}
}

// writeRequest is a remote-write WriteRequest of one series name{job=job}
// with one sample (v at ts ms), encoded as Prometheus does.
func writeRequest(name, job string, v float64, ts int64) []byte {
	lbl := func(n, val string) []byte {
		var l []byte
		l = protowire.AppendTag(l, 1, protowire.BytesType)
		l = protowire.AppendString(l, n)
		l = protowire.AppendTag(l, 2, protowire.BytesType)
		return protowire.AppendString(l, val)
	}
	var smp []byte
	smp = protowire.AppendTag(smp, 1, protowire.Fixed64Type)
	smp = protowire.AppendFixed64(smp, math.Float64bits(v))
	smp = protowire.AppendTag(smp, 2, protowire.VarintType)
	smp = protowire.AppendVarint(smp, uint64(ts))
	var series []byte
	for _, l := range [][]byte{lbl("__name__", name), lbl("job", job)} {
		series = protowire.AppendTag(series, 1, protowire.BytesType)
		series = protowire.AppendBytes(series, l)
	}
	series = protowire.AppendTag(series, 2, protowire.BytesType)
	series = protowire.AppendBytes(series, smp)
	var req []byte
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	return protowire.AppendBytes(req, series)
}

// marked is the stored record of a collector's request body.
func marked(k telemetry.Kind, body []byte) []byte { return telemetry.Append(nil, k, body) }

// request is one request a receiver got, its body decoded.
type request struct {
	path, contentType, encoding, version string
	body                                 []byte
}

// receiver is an httptest receiver that records what it accepts; answer
// (nil: 200) decides each request's status and headers.
type receiver struct {
	srv    *httptest.Server
	answer func(n int, r request) reply

	mu                    sync.Mutex
	got                   []request // accepted (2xx), in arrival order
	attempts              int
	inFlight, maxInFlight int
	block                 chan struct{} // when set, a request waits for it to close
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (rc *receiver) serve(w http.ResponseWriter, req *http.Request) {
	raw, _ := io.ReadAll(req.Body)
	got := request{path: req.URL.Path, contentType: req.Header.Get("Content-Type"), encoding: req.Header.Get("Content-Encoding"),
		version: req.Header.Get("X-Prometheus-Remote-Write-Version"), body: raw}
	if got.encoding == "snappy" {
		b, err := snappy.Decode(nil, raw)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got.body = b
	}
	rc.mu.Lock()
	rc.attempts++
	n := rc.attempts
	rc.inFlight++
	rc.maxInFlight = max(rc.maxInFlight, rc.inFlight)
	block := rc.block
	rc.mu.Unlock()
	if block != nil {
		<-block
	}
	a := reply{status: http.StatusOK}
	if rc.answer != nil {
		a = rc.answer(n, got)
	}
	status := a.status
	rc.mu.Lock()
	rc.inFlight--
	if status/100 == 2 {
		rc.got = append(rc.got, got)
	}
	rc.mu.Unlock()
	for k, v := range a.header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	w.Write(a.body)
}

// reply is a receiver's answer to one request.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// accepted returns the requests accepted so far.
func (rc *receiver) accepted() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.got...)
}

// target is the receiver as an --export target of protocol p.
func (rc *receiver) target(t *testing.T, p Protocol) Target {
	u, err := url.Parse(rc.srv.URL + "/api/v1/write")
	if p == OTLP {
		u, err = url.Parse(rc.srv.URL + "/otlp")
	}
	if err != nil {
		t.Fatal(err)
	}
	return Target{Protocol: p, URL: u}
}

// running is an exporter running in the background on a registry of its
// own.
type running struct {
	e    *Exporter
	reg  *prometheus.Registry
	stop func() error
}

func startExporter(t *testing.T, st *testStore, tg Target) *running {
	t.Helper()
	return startExporterOn(t, st.st, st.dir, tg)
}

// startExporterOn runs an exporter over any reader of the store in dir.
func startExporterOn(t testing.TB, r store.Reader, dir string, tg Target) *running {
	t.Helper()
	reg := prometheus.NewRegistry()
	e := New(Config{Target: tg, Reader: r, Decoder: &store.BodyDecoder{Dicts: store.NewDicts(dir)},
		Metrics: NewMetrics(reg), Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { e.Run(ctx); done <- nil }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { stop() })
	return &running{e: e, reg: reg, stop: stop}
}

// errors returns sluice_export_errors_total for reason.
func (r *running) errors(reason string) float64 {
	var m dto.Metric
	if err := r.e.cfg.Metrics.errors.WithLabelValues(r.e.name, reason).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func (r request) String() string { return fmt.Sprintf("%s %q", r.path, r.body) }
