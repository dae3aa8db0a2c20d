package tck

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConformanceRSocketPy runs the checks against rsocket-py 0.4.20's
// echo server (interop/rsocket-py/server.py, installed by
// interop/rsocket-py/setup.sh) and compares every result with the
// rsocket-py column of docs/rsocket-conformance.md, so the published table
// cannot drift from what the runner finds.
func TestConformanceRSocketPy(t *testing.T) {
	py := os.Getenv("SLUICE_RSOCKET_PY")
	if py == "" {
		home, _ := os.UserHomeDir()
		py = filepath.Join(home, ".cache", "sluice", "rsocket-py", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		msg := fmt.Sprintf("rsocket-py not installed (%v): run interop/rsocket-py/setup.sh or set SLUICE_RSOCKET_PY", err)
		if os.Getenv("SLUICE_INTEROP") == "require" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("..", "..", "interop", "rsocket-py", "server.py"), "0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	var ev struct {
		Event string
		Port  int
	}
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Event != "listening" {
		t.Fatalf("server.py did not start: %q", sc.Text())
	}
	go func() {
		for sc.Scan() {
		}
	}()

	rep := Run(ctx, Config{URL: fmt.Sprintf("tcp://127.0.0.1:%d", ev.Port), Timeout: 2 * time.Second, Quiet: 150 * time.Millisecond})
	published := publishedColumn(t, "rsocket-py 0.4.20 (tcp)")
	if len(published) != len(IDs()) {
		t.Fatalf("the published column has %d checks, the runner %d", len(published), len(IDs()))
	}
	for _, r := range rep.Results {
		if want, ok := published[r.ID]; !ok || want != r.Status {
			t.Errorf("%s: %s (%s); docs/rsocket-conformance.md says %q", r.ID, r.Status, r.Detail, want)
		}
	}
}

// publishedColumn reads one column of the results table in
// docs/rsocket-conformance.md: check id → status.
func publishedColumn(t *testing.T, column string) map[string]Status {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "rsocket-conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	col := -1
	got := map[string]Status{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "/"), " | ")
		if col < 0 {
			for i, c := range cells {
				if strings.TrimSpace(strings.Trim(c, "|")) == column {
					col = i
				}
			}
			continue
		}
		id := strings.Trim(strings.TrimPrefix(cells[0], "| "), "`")
		if col < len(cells) && strings.HasPrefix(cells[0], "| `") {
			s := strings.ToLower(strings.Trim(strings.TrimSpace(strings.TrimSuffix(cells[col], " |")), "*|"))
			got[id] = Status(strings.TrimSpace(s))
		}
	}
	if col < 0 || len(got) == 0 {
		t.Fatalf("no column %q in docs/rsocket-conformance.md", column)
	}
	return got
}
