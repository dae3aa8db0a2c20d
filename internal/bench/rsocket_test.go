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
