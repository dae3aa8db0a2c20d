package main

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAgentSpoolLocked: a second `sluice agent` on a spool in use exits
// non-zero at once, naming the process that holds it.
func TestAgentSpoolLocked(t *testing.T) {
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	ingest := freeAddr(t)
	first := start(t, "agent", "agent", "--sink", "127.0.0.1:1", "--spool", spool, "--ingest", ingest)
	// Listening on ingest means the spool is open (and locked).
	waitFor(t, "the first agent to start", 30*time.Second, func() bool {
		c, err := net.Dial("tcp", ingest)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	second := exec.Command(sluiceBin, "agent", "--sink", "127.0.0.1:1", "--spool", spool, "--ingest", freeAddr(t))
	var out bytes.Buffer
	second.Stdout, second.Stderr = &out, &out
	done := make(chan error, 1)
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- second.Wait() }()
	select {
	case err := <-done:
		want := fmt.Sprintf("spool %s is in use by another sluice process (pid %d)", spool, first.cmd.Process.Pid)
		if err == nil || !strings.Contains(out.String(), want) {
			t.Fatalf("second agent: %v\n%s\nwant a failure saying %q", err, out.String(), want)
		}
	case <-time.After(30 * time.Second):
		second.Process.Kill()
		t.Fatalf("the second agent on the same spool kept running:\n%s", out.String())
	}
}
