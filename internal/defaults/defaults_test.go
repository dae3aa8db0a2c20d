package defaults

import (
	"strings"
	"testing"
)

// The table is sorted, each (flag, daemon) appears once, and every entry
// has a known type and a one-line meaning.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for _, e := range Table {
		key := e.Flag + " " + strings.Join(e.Daemons, ",")
		if key < prev {
			t.Errorf("%s comes after %s: keep the table sorted by flag, then daemon", key, prev)
		}
		prev = key
		for _, d := range e.Daemons {
			if d != Agent && d != Sink {
				t.Errorf("%s: unknown daemon %q", e.Flag, d)
			}
			if seen[e.Flag+" "+d] {
				t.Errorf("%s of %s appears twice", e.Flag, d)
			}
			seen[e.Flag+" "+d] = true
		}
		if len(e.Daemons) == 0 || e.Kind() == "?" || e.Default() == "?" {
			t.Errorf("%s: daemons %v, type %s", e.Flag, e.Daemons, e.Kind())
		}
		if e.Meaning == "" || strings.Contains(e.Meaning, "\n") {
			t.Errorf("%s: want a one-line meaning, have %q", e.Flag, e.Meaning)
		}
		if e.List && e.Kind() != "string" {
			t.Errorf("%s: a list flag must be a string flag", e.Flag)
		}
	}
}

// Defaults that must agree with each other do.
func TestConsistent(t *testing.T) {
	if SinkMaxMessage < MaxMessage {
		t.Errorf("a sink with default settings (max-message %d) refuses an agent's largest message (%d)", SinkMaxMessage, MaxMessage)
	}
	if AgentMaxMessage > MaxMessage || AgentMaxMessage < MinAgentMaxMessage {
		t.Errorf("agent max-message %d outside [%d, %d]", AgentMaxMessage, MinAgentMaxMessage, MaxMessage)
	}
	if SpoolQuota < max(MinSpoolQuota, 4*MaxMessage) {
		t.Errorf("the default spool quota %d is below its own minimum", SpoolQuota)
	}
	if SinkMaxMessage > SinkMaxMessageLimit {
		t.Errorf("sink max-message %d above its limit %d", SinkMaxMessage, SinkMaxMessageLimit)
	}
	if InitialRTO < MinRTO || InitialRTO > MaxRTO || ReconnectMin > ReconnectMax || MinReconnectMax > ReconnectMax {
		t.Error("RTO or reconnect bounds out of order")
	}
	if QueueBytes < SinkMaxMessage {
		t.Errorf("a stream's byte credit (%d) cannot hold one largest message (%d)", QueueBytes, SinkMaxMessage)
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 100: "100B", 1 << 10: "1KiB", 1536 << 10: "1536KiB", 4 << 20: "4MiB", 1 << 30: "1GiB", 1000: "1000B"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
