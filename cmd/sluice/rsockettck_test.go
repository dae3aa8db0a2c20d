package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRSocketTCKCLI: `sluice rsocket tck` against `sluice rsocket serve`
// passes (exit 0), prints the table and writes --json.
func TestRSocketTCKCLI(t *testing.T) {
	tcpURL, _ := startRSocketServe(t, "--lease")
	js := filepath.Join(t.TempDir(), "tck.json")
	code, out, errs := run("rsocket", "tck", "--url", tcpURL, "--quiet", "100ms", "--json", js)
	if code != 0 || !strings.Contains(out, " 0 fail") || !strings.Contains(out, "request-n-exact") {
		t.Fatalf("code %d\nstdout:\n%s\nstderr: %s", code, out, errs)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		URL     string
		Results []struct{ ID, Status string }
	}
	if err := json.Unmarshal(b, &rep); err != nil || rep.URL != tcpURL || len(rep.Results) < 30 {
		t.Fatalf("json: %v %+v", err, rep)
	}
	if code, _, errs := run("rsocket", "tck", "--url", tcpURL, "--only", "nope"); code != 2 || !strings.Contains(errs, `unknown check "nope"`) {
		t.Errorf("--only nope: code %d stderr %q", code, errs)
	}
	// Nothing listens there: every check fails, exit 1.
	if code, out, _ := run("rsocket", "tck", "--url", "tcp://127.0.0.1:1", "--only", "keepalive-echo"); code != 1 || !strings.Contains(out, "FAIL") {
		t.Errorf("no server: code %d stdout %q", code, out)
	}
}
