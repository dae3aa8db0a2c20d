package collect_test

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/testkit/testskip"
)

// TestPrometheusRemoteWrite: a real Prometheus (Debian's 2.42), scraping
// itself every second and remote-writing to the agent's /api/v1/write
// with an external label marking this run, gets its series through the
// agent into the sink's store, where they are WriteRequests that carry
// the marker, stored in the columnar encoding (internal/telemetry/rwcodec).
func TestPrometheusRemoteWrite(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		testskip.Missing(t, "SLUICE_PROMETHEUS", "Prometheus", "prometheus is not installed: run scripts/install-prometheus.sh")
	}
	p := startPipeline(t)
	dir := t.TempDir()
	web := freePort(t)
	marker := fmt.Sprintf("run-%d", os.Getpid())
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  external_labels:
    sluice_marker: %s
scrape_configs:
  - job_name: self
    static_configs:
      - targets: ['%s']
remote_write:
  - url: http://%s/api/v1/write
    queue_config:
      batch_send_deadline: 1s
`, marker, web, p.httpAddr)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+web)
	logFile, _ := os.Create(filepath.Join(dir, "prometheus.log"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	var storedAs telemetry.Kind
	p.waitFor(t, "Prometheus' own up series with the marker in the sink's store", func(got []marked) bool {
		for _, m := range got {
			if m.kind != telemetry.RemoteWrite {
				continue
			}
			for _, l := range seriesLabels(t, m.body) {
				if l["__name__"] == "up" && l["job"] == "self" && l["sluice_marker"] == marker {
					storedAs = m.storedAs
					return true
				}
			}
		}
		return false
	})
	// A real Prometheus' samples request is one the columnar encoding
	// carries: stored as the protobuf, it would cost ~1.6× the bytes.
	if storedAs != telemetry.RemoteWriteColumns {
		t.Errorf("Prometheus' request stored as %v, want %v", storedAs, telemetry.RemoteWriteColumns)
	}
}

// freePort is a loopback address that was free a moment ago, for
// Prometheus to bind. The port is below Linux's ephemeral range
// (32768–60999), which the kernel also hands to outgoing connections of
// tests running in parallel (cmd/sluice freeAddr has the story).
func freePort(t *testing.T) string {
	t.Helper()
	for range 200 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000)))
		if err != nil {
			continue
		}
		l.Close()
		return l.Addr().String()
	}
	t.Fatal("no free port in 20000–31999 after 200 tries")
	return ""
}
