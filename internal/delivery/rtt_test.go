package delivery

import (
	"testing"
	"time"
)

// RFC 6298 section 2: the first sample sets SRTT = R, RTTVAR = R/2; later
// ones use α = 1/8, β = 1/4; RTO = SRTT + 4 RTTVAR, clamped.
func TestRTTEstimator(t *testing.T) {
	e := newRTTEstimator(time.Second, 10*time.Millisecond, 10*time.Second)
	if e.rto != time.Second {
		t.Fatalf("initial RTO %v", e.rto)
	}
	e.sample(100 * time.Millisecond)
	if e.srtt != 100*time.Millisecond || e.rttvar != 50*time.Millisecond || e.rto != 300*time.Millisecond {
		t.Fatalf("first sample: srtt %v rttvar %v rto %v", e.srtt, e.rttvar, e.rto)
	}
	e.sample(200 * time.Millisecond)
	// rttvar = 3/4·50 + 1/4·|100−200| = 62.5; srtt = 7/8·100 + 1/8·200 = 112.5
	if e.srtt != 112500*time.Microsecond || e.rttvar != 62500*time.Microsecond || e.rto != 362500*time.Microsecond {
		t.Fatalf("second sample: srtt %v rttvar %v rto %v", e.srtt, e.rttvar, e.rto)
	}
	for range 100 {
		e.sample(time.Millisecond)
	}
	if e.rto != 10*time.Millisecond {
		t.Fatalf("RTO %v, want clamped to MinRTO", e.rto)
	}
	e.sample(-time.Second) // a clock step backwards is taken as 0
	if e.srtt < 0 || e.rto != 10*time.Millisecond {
		t.Fatalf("negative sample: srtt %v rto %v", e.srtt, e.rto)
	}
}

func TestRTTBackoff(t *testing.T) {
	e := newRTTEstimator(time.Second, time.Second, 3*time.Second)
	e.backoff(0, 10)
	e.backoff(5, 11) // sent before the last back-off: same round
	if e.rto != 2*time.Second {
		t.Fatalf("rto %v, want one doubling", e.rto)
	}
	e.backoff(10, 20)
	if e.rto != 3*time.Second {
		t.Fatalf("rto %v, want MaxRTO", e.rto)
	}
	e.backoff(20, 30)
	if e.rto != 3*time.Second {
		t.Fatalf("rto %v, want MaxRTO", e.rto)
	}
	e.sample(time.Second) // a fresh sample clears the back-off
	if e.rto != 3*time.Second && e.rto != e.clamp(e.srtt+4*e.rttvar) {
		t.Fatalf("rto %v after a sample", e.rto)
	}
}
