package lines

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
)

// TestRetryReporterBacksOff: produce says the agent is still failing at
// 2, 4, 8 and 16 s, then every 30 s, not at every 2 s report of the
// client (300 lines in a 10-minute outage, found by hand 2026-11-29).
func TestRetryReporterBacksOff(t *testing.T) {
	var b strings.Builder
	report := RetryReporter(&b)
	report(client.RetryStatus{Agent: "a", Failing: true, First: true, Cause: "507", GiveUpIn: 10 * time.Minute})
	for s := 2; s <= 600; s += 2 {
		report(client.RetryStatus{Agent: "a", Failing: true, For: time.Duration(s) * time.Second, Cause: "507", GiveUpIn: time.Duration(600-s) * time.Second})
	}
	if strings.Contains(b.String(), "in 0s") {
		t.Fatalf("a line counts down to 0s (the call's own error says it gave up):\n%s", b.String())
	}
	var at []string
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n")[1:] {
		at = append(at, strings.Fields(strings.SplitN(line, "after ", 2)[1])[0])
	}
	want := "2s 4s 8s 16s 32s 1m2s 1m32s 2m2s 2m32s 3m2s 3m32s 4m2s 4m32s 5m2s 5m32s 6m2s 6m32s 7m2s 7m32s 8m2s 8m32s 9m2s 9m32s"
	if got := strings.Join(at, " "); got != want {
		t.Fatalf("still-failing lines at %s, want %s", got, want)
	}
}

// TestRetryReporterNeverGivesUpInZero: a failure first seen when the
// --timeout is spent says so, not "giving up in 0s" (found by hand).
func TestRetryReporterNeverGivesUpInZero(t *testing.T) {
	var b strings.Builder
	RetryReporter(&b)(client.RetryStatus{Agent: "a", Failing: true, First: true, Cause: "507", GiveUpIn: 300 * time.Millisecond})
	if got := b.String(); strings.Contains(got, "0s") || !strings.Contains(got, "--timeout reached, giving up") {
		t.Fatalf("got %q", got)
	}
}
