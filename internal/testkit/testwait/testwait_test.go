package testwait

import (
	"sync/atomic"
	"testing"
)

// For returns once the condition holds, having checked it until then.
func TestForReturnsWhenTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	For(t, "the third check", func() bool { return calls.Add(1) >= 3 })
	if n := calls.Load(); n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

// A condition that never holds is a failure, not a hang: poller gives up
// at its bound (zero here, so the test does not wait for it).
func TestPollerGivesUp(t *testing.T) {
	if poller(0, func() bool { return false }) {
		t.Fatal("poller reported a condition that never held as met")
	}
	if !poller(0, func() bool { return true }) {
		t.Fatal("poller missed a condition that held at once")
	}
}

// Until reports a condition that comes to hold.
func TestUntilReportsTheCondition(t *testing.T) {
	var calls atomic.Int32
	if !Until(func() bool { return calls.Add(1) >= 2 }) {
		t.Fatal("Until missed a condition that held on the second check")
	}
}
