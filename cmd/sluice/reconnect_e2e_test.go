package main

import (
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAgentReconnectBound: an agent with --reconnect-max 100ms keeps
// dialing a sink that drops every connection at most that far apart, and
// connects once the sink is back. Before issue 24 gRPC's own connect
// back-off (1 s growing to 120 s) sat under the agent's: 12 attempts took
// over a minute, and after a 33 s outage the agent with the default 5 s
// took 11.3 s to reconnect. Counted, not timed: the waits are generous.
func TestAgentReconnectBound(t *testing.T) {
	dir := t.TempDir()
	sinkAddr := freeAddr(t)
	// A sink that is not there yet: its port accepts and closes at once.
	down, err := net.Listen("tcp", sinkAddr)
	if err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int32
	go func() {
		for {
			c, err := down.Accept()
			if err != nil {
				return
			}
			attempts.Add(1)
			c.Close()
		}
	}()
	ingest := freeAddr(t)
	ag := start(t, "agent", "agent", "--sink", sinkAddr, "--spool", filepath.Join(dir, "spool"),
		"--ingest", ingest, "--metrics", freeAddr(t), "--reconnect-max", "100ms")
	waitFor(t, "12 connection attempts of the agent", 60*time.Second, func() bool { return attempts.Load() >= 12 })
	down.Close()
	start(t, "sink", "sink", "--listen", sinkAddr, "--data", filepath.Join(dir, "sink"), "--metrics", freeAddr(t))
	waitFor(t, "the agent's \"connected to sink\"", 60*time.Second, func() bool {
		return strings.Contains(ag.log.String(), "connected to sink")
	})
}
