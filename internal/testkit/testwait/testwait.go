// Package testwait has For, the one way sluice's tests wait for something to
// become true: poll a condition, fail the test if it never holds. Tests
// wait for outcomes, never for time (a sleep that is long enough on one
// machine is too short on a loaded one), so the bound is generous and
// only turns a hang into a failure with a message; it is not an assertion
// about how long anything takes.
package testwait

import (
	"testing"
	"time"
)

// Bound is how long For polls before it fails the test: long enough that
// only a hang reaches it on a 2-core machine shared by several test runs
// (the longest bound the copies it replaced used).
const Bound = 2 * time.Minute

// poll is the pause between two checks: short, so a test goes on soon
// after the condition holds, and long enough not to starve what it waits
// for.
const poll = 5 * time.Millisecond

// For polls cond until it returns true and fails tb ("timed out waiting
// for <what>") if it has not after Bound.
func For(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	if !poller(Bound, cond) {
		tb.Fatalf("timed out waiting for %s (after %v)", what, Bound)
	}
}

// Until polls cond like For and reports whether it held before Bound,
// for a test whose failure message shows the state it waited on:
//
//	if !testwait.Until(func() bool { return s.Acked() >= n }) {
//		t.Fatalf("acked %d, want %d", s.Acked(), n)
//	}
func Until(cond func() bool) bool { return poller(Bound, cond) }

// poller polls cond until it holds (true) or bound has passed (false).
func poller(bound time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(poll)
	}
	return true
}
