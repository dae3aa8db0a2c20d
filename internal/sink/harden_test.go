package sink

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
	"github.com/sluicehq/sluice/internal/testkit/testtmpfs"
)

// TestDataDirLocked: a second sink on the same data directory is refused
// with a clear error while the first runs, and may start once it closed.
func TestDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	first, err := New(Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	want := fmt.Sprintf("data %s is in use by another sluice process (pid %d)", dir, os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) {
		first.Close()
		t.Fatalf("second sink on one data directory: err %v, want it to contain %q", err, want)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := New(Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("after Close, the data directory should be free: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadyEmbedded: Ready is nil while the embedded store takes appends,
// says why once a group commit fails (a full disk), and is nil again once a
// commit succeeds.
func TestReadyEmbedded(t *testing.T) {
	dir := testtmpfs.Mount(t, "256k")
	h := newHarness(t, func(c *Config) { c.DataDir = dir })
	if err := h.s.Ready(); err != nil {
		t.Fatalf("fresh sink not ready: %v", err)
	}
	big := strings.Repeat("r", 60<<10)
	a := h.connect("a")
	full := false
	for id := uint64(1); id <= 64 && !full; id++ {
		a.Send(sinkclient.PlainRequest(id, big))
	wait:
		for {
			select {
			case r, ok := <-a.Resps:
				if !ok {
					full = true // the failed commit ended the stream
					break wait
				}
				if r.GetAck() != nil {
					break wait
				}
			case <-time.After(wait):
				t.Fatalf("message %d: neither acked nor the stream ended", id)
			}
		}
	}
	if !full {
		t.Fatal("a 256k tmpfs took 64 messages of 60k")
	}
	err := h.s.Ready()
	if err == nil || !strings.Contains(err.Error(), "store does not accept appends") {
		t.Fatalf("Ready after a failed commit: %v", err)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=8m", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v %s", err, out)
	}
	b := h.connect("b")
	b.Send(sinkclient.PlainRequest(1, "after the disk grew"))
	b.Collect(1)
	if err := h.s.Ready(); err != nil {
		t.Fatalf("Ready after a successful commit: %v", err)
	}
	s := h.s
	h.stop()
	if err := s.Ready(); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("Ready after Close: %v", err)
	}
}

// gatherTypes returns the type of every metric family in reg.
func gatherTypes(t *testing.T, reg *prometheus.Registry) map[string]dto.MetricType {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]dto.MetricType, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf.GetType()
	}
	return out
}

// TestMetricKinds: a metric named *_total is a counter and every counter
// is named *_total; the Kafka store's metrics are exported only by a sink
// whose store is Kafka.
func TestMetricKinds(t *testing.T) {
	h := newHarness(t, nil)
	embedded := gatherTypes(t, h.s.Registry())
	kreg := prometheus.NewRegistry()
	newMetrics(kreg, true)
	kafka := gatherTypes(t, kreg)
	for _, set := range []map[string]dto.MetricType{embedded, kafka} {
		for name, typ := range set {
			if strings.HasSuffix(name, "_total") != (typ == dto.MetricType_COUNTER) {
				t.Errorf("%s is a %v: only counters, and all of them, end in _total", name, typ)
			}
			if strings.ToLower(name) != name {
				t.Errorf("%s: metric names are lower snake case", name)
			}
		}
	}
	for name := range embedded {
		if strings.Contains(name, "kafka") {
			t.Errorf("embedded sink exports %s", name)
		}
	}
	if _, ok := kafka["sluice_sink_kafka_records_total"]; !ok {
		t.Error("Kafka metrics not registered for a Kafka store")
	}
}

// TestKafkaStartUnreachable: with no broker at the address, New keeps
// trying for Config.KafkaStartTimeout, then fails with the brokers' error
// (not a formatting artifact like %!w(<nil>)). No broker is needed.
func TestKafkaStartUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there now
	_, err = New(Config{DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Store: "kafka://" + addr + "/t",
		KafkaStartTimeout: 1500 * time.Millisecond})
	if err == nil {
		t.Fatal("New succeeded without a broker")
	}
	msg := err.Error()
	t.Log(msg)
	if strings.Contains(msg, "%!") || !strings.Contains(msg, "cannot reach the brokers within 1.5s") {
		t.Errorf("error %q: want the wait and the brokers' error", msg)
	}
	var attempts int
	if _, err := fmt.Sscanf(msg[strings.Index(msg, "within"):], "within 1.5s (%d attempts)", &attempts); err != nil || attempts < 2 {
		t.Errorf("error %q: want at least 2 attempts (it must keep trying until the timeout)", msg)
	}
}

// metricsDoc lists the sink's metrics.
const metricsDoc = "../../docs/architecture.md"

// TestDocMetrics: the metrics list of docs/architecture.md ("The sink in
// detail", "Metrics") names every metric the sink registers, with its
// type, and marks those of one store only.
func TestDocMetrics(t *testing.T) {
	src, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ typ, store string }
	doc := map[string]row{}
	for _, line := range strings.Split(string(src), "\n") {
		f := strings.Fields(line)
		if !strings.HasPrefix(line, "sluice_sink_") || len(f) < 3 {
			continue
		}
		r := row{typ: f[1]}
		if s := strings.TrimSuffix(f[2], ":"); s != f[2] {
			r.store = s
		}
		doc[f[0]] = r
	}
	h := newHarness(t, nil)
	embedded := gatherTypes(t, h.s.Registry())
	kreg := prometheus.NewRegistry()
	newMetrics(kreg, true)
	kafka := gatherTypes(t, kreg)
	all := map[string]dto.MetricType{}
	for _, set := range []map[string]dto.MetricType{embedded, kafka} {
		for n, typ := range set {
			all[n] = typ
		}
	}
	for n, typ := range all {
		r, ok := doc[n]
		if !ok {
			t.Errorf("metric %s is not in %s's list", n, metricsDoc)
			continue
		}
		if want := strings.ToLower(typ.String()); r.typ != want {
			t.Errorf("%s lists %s as a %s, it is a %s", metricsDoc, n, r.typ, want)
		}
		_, inEmbedded := embedded[n]
		_, inKafka := kafka[n]
		if r.store == "kafka" && inEmbedded || r.store == "embedded" && inKafka {
			t.Errorf("%s marks %s %s-only, but the other store registers it too", metricsDoc, n, r.store)
		}
	}
	for n := range doc {
		if _, ok := all[n]; !ok {
			t.Errorf("%s lists %s, which the sink does not register", metricsDoc, n)
		}
	}
}
