package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// TestProduceSinkDownThenConsume: `produce` to an agent whose sink is
// down exits 0 (the lines are spooled) and says they wait there; once the
// sink is up, `consume` prints them and a summary on stderr. Before issue
// 24 produce said only "3 lines spooled", consume nothing on stderr.
func TestProduceSinkDownThenConsume(t *testing.T) {
	dir := t.TempDir()
	sinkAddr, ingest, agentMetrics := freeAddr(t), freeAddr(t), freeAddr(t)
	ag := start(t, "agent", "agent", "--sink", sinkAddr, "--spool", filepath.Join(dir, "spool"),
		"--ingest", ingest, "--metrics", agentMetrics, "--reconnect-max", "100ms")
	testwait.For(t, "the agent's ingest", func() bool { return strings.Contains(ag.log.String(), "ingest listening") })
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, []byte("alpha\nbeta\ngamma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sluiceBin, "produce", "--agent", ingest, "--file", in).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "produce: 3 lines spooled") ||
		!strings.Contains(string(out), "produce: the agent at "+ingest+" is not connected to a sink") ||
		!strings.Contains(string(out), "the lines wait in its spool and are delivered once it reaches the sink") {
		t.Fatalf("produce with the sink down: %v\n%s", err, out)
	}
	t.Logf("produce said:\n%s", out)
	start(t, "sink", "sink", "--listen", sinkAddr, "--data", filepath.Join(dir, "sink"), "--metrics", freeAddr(t))
	testwait.For(t, "3 records acked", func() bool { return metric(agentMetrics, "sluice_agent_acked_records_total") >= 3 })
	cmd := exec.Command(sluiceBin, "consume", "--sink", sinkAddr)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil || string(stdout) != "alpha\nbeta\ngamma\n" ||
		!regexp.MustCompile(`(?m)^consume: 3 records, 14 bytes, last offset \d+$`).MatchString(stderr.String()) {
		t.Fatalf("consume: %v, stdout %q, stderr %q; want the 3 records and 'consume: 3 records, 14 bytes, last offset N'", err, stdout, stderr.String())
	}
	t.Logf("consume said: %s", stderr.String())
}

// TestProduceToSecuredIngest: `sluice produce` reaches an agent whose
// ingest requires a token (--ingest-tokens), with --token-file (and
// --insecure-token on loopback), and is refused without one. Before,
// produce had no credential flags: the documented resend of dead letters
// (`dead-letter list --records | sluice produce`) failed with 401 on any
// secured agent (found by hand).
func TestProduceToSecuredIngest(t *testing.T) {
	dir := t.TempDir()
	ingest := freeAddr(t)
	tokens, tokenFile := filepath.Join(dir, "tokens"), filepath.Join(dir, "token")
	if err := os.WriteFile(tokens, []byte("s3cret-ingest-token edge-producer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte("s3cret-ingest-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ag := start(t, "agent", "agent", "--sink", freeAddr(t), "--spool", filepath.Join(dir, "spool"),
		"--ingest", ingest, "--ingest-tokens", tokens, "--metrics", freeAddr(t))
	testwait.For(t, "the agent's ingest", func() bool { return strings.Contains(ag.log.String(), "ingest listening") })
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, []byte("alpha\nbeta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sluiceBin, "produce", "--agent", ingest, "--file", in, "--timeout", "5s").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "401") {
		t.Fatalf("produce without a token to a secured ingest: %v\n%s\nwant a 401", err, out)
	}
	out, err = exec.Command(sluiceBin, "produce", "--agent", ingest, "--file", in, "--token-file", tokenFile).CombinedOutput()
	if err == nil {
		t.Fatalf("produce with a token in clear text and no --insecure-token: accepted\n%s", out)
	}
	out, err = exec.Command(sluiceBin, "produce", "--agent", ingest, "--file", in, "--token-file", tokenFile, "--insecure-token").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "produce: 2 lines spooled") {
		t.Fatalf("produce with the token: %v\n%s", err, out)
	}
}
