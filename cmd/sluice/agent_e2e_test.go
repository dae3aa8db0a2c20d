package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/testpki"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// TestAgentSpoolLocked: a second `sluice agent` on a spool in use exits
// non-zero at once, naming the process that holds it.
func TestAgentSpoolLocked(t *testing.T) {
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	ingest := freeAddr(t)
	first := start(t, "agent", "agent", "--sink", "127.0.0.1:1", "--spool", spool, "--ingest", ingest)
	// Listening on ingest means the spool is open (and locked).
	testwait.For(t, "the first agent to start", func() bool {
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

// TestAgentIngestTLSAndTokens: `sluice agent --ingest-tls-cert/--ingest-tls-key
// --ingest-tokens` serves ingest over HTTPS and answers 401 without a
// valid token.
func TestAgentIngestTLSAndTokens(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := testpki.SelfSigned(t, dir)
	tokens := filepath.Join(dir, "tokens")
	const token = "ingest-token-0123456789"
	os.WriteFile(tokens, []byte("# ingest clients\n"+token+" collector-1\n"), 0o600)
	ingest := freeAddr(t)
	start(t, "agent", "agent", "--sink", "127.0.0.1:1", "--spool", filepath.Join(dir, "spool"), "--ingest", ingest,
		"--ingest-tls-cert", certFile, "--ingest-tls-key", keyFile, "--ingest-tokens", tokens)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	post := func(authz string) int {
		return postStatus(client, "https://"+ingest+"/v1/records", []byte("rec\n"), "Authorization", authz)
	}
	testwait.For(t, "the agent to serve HTTPS", func() bool { return post("") != -1 })
	if got := post(""); got != http.StatusUnauthorized {
		t.Fatalf("without a token: %d, want 401", got)
	}
	if got := post("Bearer wrong-token-0123456789"); got != http.StatusUnauthorized {
		t.Fatalf("with an unknown token: %d, want 401", got)
	}
	if got := post("Bearer " + token); got != http.StatusOK {
		t.Fatalf("with the token: %d, want 200", got)
	}
	out, err := exec.Command(sluiceBin, "agent", "--sink", "x:1", "--spool", filepath.Join(dir, "s2"), "--ingest-tls-cert", certFile).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--ingest-tls-cert and --ingest-tls-key go together") {
		t.Fatalf("cert without key: %v %s", err, out)
	}
}

// TestAgentDamagedSpoolCLI: on a damaged spool `sluice agent` exits
// non-zero and prints the exact repair command for the spool's log; after
// running that command the agent starts.
func TestAgentDamagedSpoolCLI(t *testing.T) {
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	ingest := freeAddr(t)
	ag := start(t, "agent", "agent", "--sink", "127.0.0.1:1", "--spool", spool, "--ingest", ingest, "--compression", "plain")
	testwait.For(t, "the agent to listen", func() bool {
		c, err := net.Dial("tcp", ingest)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	for i := 0; i < 20; i++ {
		resp, err := http.Post("http://"+ingest+"/v1/records", "text/plain", strings.NewReader(fmt.Sprintf("record %d\n", i)))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("ingest: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	ag.kill()
	seg := filepath.Join(spool, "log", fmt.Sprintf("%020d.seg", 0))
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xFF}, 30) // inside the first record's body
	f.Close()

	args := []string{"agent", "--sink", "127.0.0.1:1", "--spool", spool, "--ingest", ingest}
	out, err := exec.Command(sluiceBin, args...).CombinedOutput()
	want := "sluice log check --repair " + filepath.Join(spool, "log")
	if err == nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), seg) {
		t.Fatalf("agent on a damaged spool: %v\n%s\nwant the segment and %q", err, out, want)
	}
	if strings.Contains(string(out), "sluice agent: agent:") {
		t.Errorf("the command's name twice (issue 24):\n%s", out)
	}
	if out, err := exec.Command(sluiceBin, "log", "check", "--repair", filepath.Join(spool, "log")).CombinedOutput(); err != nil {
		t.Fatalf("repair: %v\n%s", err, out)
	}
	start(t, "agent", args...)
	testwait.For(t, "the repaired agent to listen", func() bool {
		c, err := net.Dial("tcp", ingest)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// postStatus POSTs body to url with the headers hdr (name, value, …; a
// header of empty value is left out) and returns the answer's status, or
// -1 when none came (the server not listening yet).
func postStatus(client *http.Client, url string, body []byte, hdr ...string) int {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] != "" {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return -1
	}
	resp.Body.Close()
	return resp.StatusCode
}
