package sink

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
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

// mountTmpfs mounts a tmpfs of size on a fresh directory, or skips the
// test when it cannot.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// TestReadyEmbedded: Ready is nil while the embedded store takes appends,
// says why once a group commit fails (a full disk), and is nil again once a
// commit succeeds.
func TestReadyEmbedded(t *testing.T) {
	dir := mountTmpfs(t, "256k")
	h := newHarness(t, func(c *Config) { c.DataDir = dir })
	if err := h.s.Ready(); err != nil {
		t.Fatalf("fresh sink not ready: %v", err)
	}
	big := strings.Repeat("r", 60<<10)
	a := h.connect("a")
	full := false
	for id := uint64(1); id <= 64 && !full; id++ {
		a.send(plainReq(id, big))
	wait:
		for {
			select {
			case r, ok := <-a.resps:
				if !ok {
					full = true // the failed commit ended the stream
					break wait
				}
				if r.GetAck() != nil {
					break wait
				}
			case <-time.After(wait):
				t.Fatalf("message %d: neither acked nor the stream ended", id)
			}
		}
	}
	if !full {
		t.Fatal("a 256k tmpfs took 64 messages of 60k")
	}
	err := h.s.Ready()
	if err == nil || !strings.Contains(err.Error(), "store does not accept appends") {
		t.Fatalf("Ready after a failed commit: %v", err)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=8m", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v %s", err, out)
	}
	b := h.connect("b")
	b.send(plainReq(1, "after the disk grew"))
	b.collect(1)
	if err := h.s.Ready(); err != nil {
		t.Fatalf("Ready after a successful commit: %v", err)
	}
	s := h.s
	h.stop()
	if err := s.Ready(); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("Ready after Close: %v", err)
	}
}
