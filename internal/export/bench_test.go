package export

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// BenchmarkExportRemoteWrite: b.N stored messages, each one remote-write
// request of 500 samples (Prometheus 2.42's max_samples_per_send), out
// through one exporter to a loopback receiver that reads and drops them:
// what one request in flight gives when the receiver is near.
func BenchmarkExportRemoteWrite(b *testing.B) {
	const samples = 500
	var req []byte
	for i := range samples {
		req = append(req, writeRequest(fmt.Sprintf("node_cpu_seconds_total_%d", i%50), fmt.Sprint("node-", i), float64(i)*1.5, 1700000000000+int64(i))...)
	}
	st := openStore(b, b.TempDir())
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	for range b.N {
		st.add(marked(telemetry.RemoteWrite, req))
	}
	u, _ := url.Parse(srv.URL + "/api/v1/write")
	b.SetBytes(int64(len(req)))
	b.ResetTimer()
	x := startExporterOn(b, st.st, st.dir, Target{Protocol: RemoteWrite, URL: u})
	testwait.For(b, "every request", func() bool { return got.Load() >= int64(b.N) })
	b.StopTimer()
	x.stop()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
	b.ReportMetric(float64(b.N*samples)/b.Elapsed().Seconds(), "samples/s")
}
