package rrbench

import (
	"math"
	"testing"

	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/bench/rr"
)

// Every row is reported against tcp, the limit, in the same mode and
// load, rep by rep: req/s as a share in closed loop, p50 as a multiple in
// open loop; a load tcp did not run gets no ratio.
func TestOfTCPPairsSameModeLoadAndRep(t *testing.T) {
	tcp, _ := rr.Lookup("tcp")
	grpc, _ := rr.Lookup("grpc-stream")
	configs := []config{
		{proto: tcp, mode: "closed", inflight: 128}, {proto: tcp, mode: "open"},
		{proto: grpc, mode: "closed", inflight: 128}, {proto: grpc, mode: "closed", inflight: 16}, {proto: grpc, mode: "open"},
	}
	var rs bench.Results
	add := func(c config, rps, p50 float64) { rs.Add(c.name(), nil, bench.Metrics{"rps": rps, "p50_us": p50}) }
	add(configs[0], 400, 100)
	add(configs[0], 200, 100) // rep 2
	add(configs[1], 100, 50)
	add(configs[2], 100, 300)
	add(configs[2], 100, 300)
	add(configs[3], 90, 90)
	add(configs[4], 100, 75)
	ofTCP(rs, configs)
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	g := rs.Row(configs[2].name())
	near("grpc closed 128 rep 1 rps_of_tcp", g.Reps[0]["rps_of_tcp"], 0.25)
	near("grpc closed 128 rep 2 rps_of_tcp", g.Reps[1]["rps_of_tcp"], 0.5)
	near("grpc open p50_of_tcp", rs.Row(configs[4].name()).Reps[0]["p50_of_tcp"], 1.5)
	near("tcp closed rps_of_tcp", rs.Row(configs[0].name()).Reps[0]["rps_of_tcp"], 1)
	if _, ok := rs.Row(configs[3].name()).Reps[0]["rps_of_tcp"]; ok {
		t.Error("grpc closed 16 has a ratio though tcp never ran at 16 in flight")
	}
}
