package sink

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestDataDirLocked: a second sink on the same data directory is refused
// with a clear error while the first runs, and may start once it closed.
func TestDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	first, err := New(Config{DataDir: dir, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{DataDir: dir, Logger: discardLogger()})
	want := fmt.Sprintf("data %s is in use by another sluice process (pid %d)", dir, os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) {
		first.Close()
		t.Fatalf("second sink on one data directory: err %v, want it to contain %q", err, want)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := New(Config{DataDir: dir, Logger: discardLogger()})
	if err != nil {
		t.Fatalf("after Close, the data directory should be free: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestServerKeepalive: the sink detects a half-open agent within 40 s
// (ping after 30 s of silence, 10 s to answer), and lets agents ping every
// 10 s, gRPC's shortest client keepalive, without being cut for
// too_many_pings: the enforcement minimum must be well below it.
func TestServerKeepalive(t *testing.T) {
	const agentPing = 10 * time.Second
	if ka := serverKeepalive; ka.Time == 0 || ka.Time > 30*time.Second || ka.Timeout == 0 || ka.Timeout > 10*time.Second {
		t.Errorf("server keepalive %+v: want Time in (0, 30s] and Timeout in (0, 10s]", ka)
	}
	if p := serverKeepalivePolicy; p.MinTime > agentPing/2 || !p.PermitWithoutStream {
		t.Errorf("enforcement policy %+v: want MinTime <= %v and PermitWithoutStream", p, agentPing/2)
	}
}
