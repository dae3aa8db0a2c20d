package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// ClosedLoop stops at max calls even with time left, and a failing call
// fails the run.
func TestClosedLoopBounds(t *testing.T) {
	var calls atomic.Int64
	r, err := ClosedLoop(context.Background(), 4, time.Minute, 10, func(context.Context) error { calls.Add(1); return nil })
	if err != nil || r.Requests != 10 || calls.Load() != 10 {
		t.Fatalf("max 10: %d recorded, %d calls, %v", r.Requests, calls.Load(), err)
	}
	boom := errors.New("boom")
	if _, err := ClosedLoop(context.Background(), 2, time.Minute, 1000, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing call: %v", err)
	}
	if _, err := ClosedLoop(context.Background(), 0, time.Second, 1, nil); err == nil {
		t.Fatal("0 in flight accepted")
	}
}

// AsyncLanes keeps perLane calls in flight on every lane until the time is
// up, records every completion, and a failing call fails the run.
func TestAsyncLanes(t *testing.T) {
	var perLane [3]atomic.Int64
	var inFlight, maxInFlight atomic.Int64
	r, err := AsyncLanes(context.Background(), 3, 2, 50*time.Millisecond, func(l int, done func(error)) {
		perLane[l].Add(1)
		n := inFlight.Add(1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		go func() { inFlight.Add(-1); done(nil) }()
	})
	if err != nil {
		t.Fatal(err)
	}
	total := perLane[0].Load() + perLane[1].Load() + perLane[2].Load()
	if r.Requests != total || perLane[0].Load() == 0 || perLane[1].Load() == 0 || perLane[2].Load() == 0 {
		t.Fatalf("%d recorded, calls per lane %d %d %d", r.Requests, perLane[0].Load(), perLane[1].Load(), perLane[2].Load())
	}
	if maxInFlight.Load() > 6 {
		t.Fatalf("%d in flight, want at most 3 lanes × 2", maxInFlight.Load())
	}
	boom := errors.New("boom")
	if _, err := AsyncLanes(context.Background(), 2, 2, time.Minute, func(_ int, done func(error)) { go done(boom) }); !errors.Is(err, boom) {
		t.Fatalf("failing call: %v", err)
	}
}
