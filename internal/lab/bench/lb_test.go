package bench

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/balance"
)

// The predictive balancer sends the slowed server less than round-robin
// does (shares only: durations on a shared machine prove nothing).
func TestRunLBShares(t *testing.T) {
	share := func(p balance.Policy) float64 {
		res, err := RunLB(context.Background(), LBConfig{Policy: p, Servers: 3, Slowed: 1, Slow: 20 * time.Millisecond,
			InFlight: 8, Duration: 300 * time.Millisecond, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors > 0 || res.Requests == 0 {
			t.Fatalf("%s: %+v", p, res)
		}
		return float64(res.PerServer[0]) / float64(res.PerServer[0]+res.PerServer[1]+res.PerServer[2])
	}
	pred, rr := share(balance.Predictive), share(balance.RoundRobin)
	t.Logf("slow share: predictive %.1f%%, round-robin %.1f%%", 100*pred, 100*rr)
	if pred >= 0.10 || rr < 0.25 {
		t.Fatalf("slow share: predictive %.1f%% (want < 10%%), round-robin %.1f%% (want ≈ 33%%)", 100*pred, 100*rr)
	}
	if _, err := RunLB(context.Background(), LBConfig{}); err == nil {
		t.Fatal("empty config: want an error")
	}
}
