package agent

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestSecondAgentOnSpoolFails: two agents on one spool would corrupt each
// other's checksums; the second New fails at once, naming the holder, and
// the spool is free again after Close.
func TestSecondAgentOnSpoolFails(t *testing.T) {
	dir := t.TempDir()
	a := newTestAgent(t, dir, nil)
	_, err := New(Config{SinkAddr: "127.0.0.1:1", SpoolDir: dir, Logger: quietLog})
	want := fmt.Sprintf("spool %s is in use by another sluice process (pid %d)", dir, os.Getpid())
	if err == nil || err.Error() != want {
		a.Close()
		t.Fatalf("second New: %v, want %q", err, want)
	}
	a.Close()
	b := newTestAgent(t, dir, nil)
	b.Close()
}

// TestAgentIDConfigured: a configured id is persisted on first start, kept
// when later starts omit it, and a different id is refused once the spool
// has held a message; before that (an agent started without --agent-id,
// whose token the sink refused for its random id) the new id is taken.
func TestAgentIDConfigured(t *testing.T) {
	dir := t.TempDir()
	a := newTestAgent(t, dir, nil)
	a.Close()
	a = newTestAgent(t, dir, func(c *Config) { c.AgentID = "edge-7" })
	if a.ID() != "edge-7" {
		t.Fatalf("id %q, want edge-7 taken on a spool that never held a message", a.ID())
	}
	a.Close()
	a = newTestAgent(t, dir, nil)
	if a.ID() != "edge-7" {
		t.Fatalf("id after restart without AgentID: %q", a.ID())
	}
	if err := a.IngestMessage(context.Background(), [][]byte{[]byte("held")}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	_, err := New(Config{SinkAddr: "127.0.0.1:1", SpoolDir: dir, Logger: quietLog, AgentID: "edge-8",
		ReconnectMin: time.Hour, ReconnectMax: time.Hour})
	if err == nil || !strings.Contains(err.Error(), `belongs to agent id "edge-7", not "edge-8"`) {
		t.Fatalf("New with a different id: %v", err)
	}
	// The refusal released the spool.
	a = newTestAgent(t, dir, func(c *Config) { c.AgentID = "edge-7" })
	a.Close()
	for _, bad := range []string{"has space", "tab\tid", strings.Repeat("x", 256)} {
		if _, err := New(Config{SinkAddr: "x", SpoolDir: t.TempDir(), AgentID: bad}); err == nil {
			t.Errorf("AgentID %q accepted", bad)
		}
	}
}
