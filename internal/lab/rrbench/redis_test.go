package rrbench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/bench/rr"
	"github.com/sluicehq/sluice/internal/lab/benchkit"
	"github.com/sluicehq/sluice/internal/testkit/testskip"
)

// TestRedisRowsRunOnRedisPeer runs the four Redis rows of `bench rr`
// briefly through interop/redis/cmd/redispeer, built by the bench itself
// as users get it: redcon's server with go-redis and rueidis, and the
// same clients against a real redis-server (SLUICE_REDIS=require in CI).
// Every row is measured, with no failed call, and its client's and
// server's CPU apart.
func TestRedisRowsRunOnRedisPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the bench builds interop/redis, another module")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH: cannot build interop/redis")
	}
	for _, tc := range []struct {
		server    string
		protocols []string
	}{{"redcon", []string{"resp", "resp-pipelined"}}, {"redis-server", []string{"redis", "redis-pipelined"}}} {
		t.Run(tc.server, func(t *testing.T) {
			if err := rr.Unavailable(tc.protocols[0]); err != nil {
				testskip.Missing(t, "SLUICE_REDIS", "redis-server", err.Error())
			}
			rep, out := runRedisRows(t, tc.protocols)
			if strings.Contains(out, "skipped") {
				t.Fatalf("a row was skipped:\n%s", out)
			}
			if len(rep.Rows) != 2*len(tc.protocols) {
				t.Fatalf("%d rows, want %d:\n%s", len(rep.Rows), 2*len(tc.protocols), out)
			}
			for _, r := range rep.Rows {
				m := r.Reps[0]
				if m["rps"] <= 0 || m["errors"] != 0 {
					t.Errorf("row %s: %v req/s, %v errors", r.Name, m["rps"], m["errors"])
				}
				for _, k := range []string{"client_cpu_us_per_req", "server_cpu_us_per_req", "cpu_us_per_req", "p50_us", "p999_us"} {
					if _, ok := m[k]; !ok {
						t.Errorf("row %s lacks %s", r.Name, k)
					}
				}
			}
		})
	}
}

// runRedisRows runs protocols in closed loop at 1 and 8 in flight, split,
// and returns the JSON report and the printed table.
func runRedisRows(t *testing.T, protocols []string) (bench.Report, string) {
	t.Helper()
	js := filepath.Join(t.TempDir(), "rr.json")
	cfg := Config{Protocols: protocols, Modes: []string{"closed"}, Rate: 100, InFlights: []int{1, 8}, Duration: 200 * time.Millisecond,
		Payload: 64, Split: true, BurstSeconds: 1, Report: benchkit.Report{Command: "bench rr", Reps: 1, JSONPath: js}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // the first build of the peer, on a cold module cache
	defer cancel()
	var stdout, stderr bytes.Buffer
	if err := Run(ctx, cfg, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s%s", err, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep, stdout.String()
}

// Outside the repository (no interop/redis above the working directory)
// the Redis rows are skipped, and the bench says why, as rsocket-go's are.
func TestRedisRowsSkippedOutsideRepository(t *testing.T) {
	t.Chdir(t.TempDir())
	var stdout, stderr bytes.Buffer
	cfg := Config{Protocols: []string{"resp", "resp-pipelined"}, Modes: []string{"closed"}, InFlights: []int{1},
		Duration: 100 * time.Millisecond, Payload: 64, BurstSeconds: 1, Report: benchkit.Report{Reps: 1}}
	if err := Run(context.Background(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, want := range []string{"resp skipped: interop/redis/cmd/redispeer not found above the working directory",
		"resp-pipelined skipped: interop/redis/cmd/redispeer not found"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	if strings.Contains(stdout.String(), "| resp |") {
		t.Errorf("a skipped row was measured:\n%s", stdout.String())
	}
}
