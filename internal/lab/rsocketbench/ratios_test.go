package rsocketbench

import (
	"testing"

	"github.com/sluicehq/sluice/internal/lab/bench"
)

// gRPC bidi's client is a goroutine per request waiting for its answer:
// its ratio is sluice's blocking API's, like against like, even though
// the async rows run too (they used to overwrite it).
func TestGRPCRatioPairsBlockingAPI(t *testing.T) {
	var rs bench.Results
	rs.Add(rrName(sluiceName("blocking"), 128), nil, bench.Metrics{"req_per_sec": 400})
	rs.Add(rrName(sluiceName("async"), 128), nil, bench.Metrics{"req_per_sec": 800})
	rs.Add(rrName("gRPC bidi", 128), nil, bench.Metrics{"req_per_sec": 200})
	rs.Add(rrName(rsgoName("blocking"), 128), nil, bench.Metrics{"req_per_sec": 100})
	rs.Add(rrName(rsgoName("async"), 128), nil, bench.Metrics{"req_per_sec": 100})
	Config{InFlights: []int{128}, APIs: []string{"blocking", "async"}}.ratios(rs)
	for name, want := range map[string]float64{
		rrName("gRPC bidi", 128):          2,
		rrName(rsgoName("blocking"), 128): 4,
		rrName(rsgoName("async"), 128):    8,
	} {
		if got := rs.Row(name).Reps[0]["sluice_ratio"]; got != want {
			t.Errorf("%s: sluice ratio %v, want %v", name, got, want)
		}
	}
	// Only the async API run: gRPC pairs with it (the only sluice row).
	var async bench.Results
	async.Add(rrName(sluiceName("async"), 1), nil, bench.Metrics{"req_per_sec": 300})
	async.Add(rrName("gRPC bidi", 1), nil, bench.Metrics{"req_per_sec": 100})
	Config{InFlights: []int{1}, APIs: []string{"async"}}.ratios(async)
	if got := async.Row(rrName("gRPC bidi", 1)).Reps[0]["sluice_ratio"]; got != 3 {
		t.Errorf("async only: gRPC ratio %v, want 3", got)
	}
}
