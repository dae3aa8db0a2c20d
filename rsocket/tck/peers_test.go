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
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/peers"

	"github.com/sluicehq/sluice/internal/testkit/testskip"
)

// The peers' conformance tests run each interop peer's echo server and
// compare every result with that peer's column of
// docs/rsocket-conformance.md, so the published table cannot drift from
// what the runner finds. The peers' tests, and the transports of each,
// run side by side: the checks mostly wait on the network, and a run takes
// 5-15 s per server.

// peerMissing skips the test, or fails it under SLUICE_INTEROP=require
// (CI installs every peer, so a missing one there is a broken setup).
func peerMissing(t *testing.T, msg string) {
	t.Helper()
	testskip.Missing(t, "SLUICE_INTEROP", testskip.Interop, msg)
}

// startPeer starts a peer's server and reads its stdout until listening
// has named a port for each of the transports; the process is killed when
// the test ends. listening parses one line: the transport and port it
// announces, if it is such a line.
func startPeer(t *testing.T, cmd *exec.Cmd, transports []string, listening func(line string) (string, int, bool)) map[string]int {
	t.Helper()
	proc := peers.Start(t, cmd, false)
	out := proc.Stdout
	ports := map[string]int{}
	sc := bufio.NewScanner(out)
	var lines []string
	for len(ports) < len(transports) && sc.Scan() {
		if tr, port, ok := listening(sc.Text()); ok {
			ports[tr] = port
		} else if len(lines) < 20 {
			lines = append(lines, sc.Text())
		}
	}
	for _, tr := range transports {
		if ports[tr] == 0 {
			t.Fatalf("%v did not announce its %s port; stdout: %q; stderr:\n%s", cmd.Args, tr, lines, proc.Stderr())
		}
	}
	// The server goes on reporting events; a full pipe would block it.
	go func() {
		for sc.Scan() {
		}
	}()
	return ports
}

// jsonListening parses {"event":"listening","port":N}, the first line of
// rsocket-py's and rsocket-js's servers, which serve one transport each.
func jsonListening(transport string) func(string) (string, int, bool) {
	return func(line string) (string, int, bool) {
		var ev struct {
			Event string
			Port  int
		}
		if json.Unmarshal([]byte(line), &ev) != nil || ev.Event != "listening" || ev.Port <= 0 {
			return "", 0, false
		}
		return transport, ev.Port, true
	}
}

// column is one column of the results table and the server it is from.
type column struct {
	name string // the header in docs/rsocket-conformance.md
	url  string
}

// conformsAsPublished runs the checks against each column's server, side
// by side, and compares every result with the published column. The
// subtests run from goroutines rather than with t.Parallel, which would
// queue them behind go test's -parallel limit (GOMAXPROCS, 2 here) though
// they mostly wait on the network.
func conformsAsPublished(t *testing.T, ctx context.Context, cols ...column) {
	t.Helper()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, c := range cols {
		wg.Go(func() {
			t.Run(c.name, func(t *testing.T) {
				published := publishedColumn(t, c.name)
				if len(published) != len(IDs()) {
					t.Fatalf("the published column has %d checks, the runner %d", len(published), len(IDs()))
				}
				warmUp(t, ctx, c.url)
				rep := Run(ctx, Config{URL: c.url, Timeout: 2 * time.Second, Quiet: 150 * time.Millisecond})
				n := rep.Counts()
				t.Logf("%s: %d pass, %d fail, %d warn, %d skip", c.url, n[Pass], n[Fail], n[Warn], n[Skip])
				for _, r := range rep.Results {
					if want, ok := published[r.ID]; !ok || want != r.Status {
						t.Errorf("%s: %s (%s); docs/rsocket-conformance.md says %q", r.ID, r.Status, r.Detail, want)
					}
				}
			})
		})
	}
}

// warmUp waits, with a generous bound, until the server answers the echo
// probe, so that a slow first answer cannot become a "no verdict" within a
// check's 2 s bound. A precaution: a cold JVM answered its first request
// in 0.25 s here, but the Java interop test has seen over a second on a
// loaded machine.
func warmUp(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	rep := Run(ctx, Config{URL: url, Timeout: 30 * time.Second, Only: []string{"echo-contract"}})
	if len(rep.Results) != 1 || rep.Results[0].Status != Pass {
		t.Fatalf("%s does not answer the echo probe: %+v", url, rep.Results)
	}
}

// TestConformanceRSocketPy: rsocket-py 0.4.20's echo server
// (interop/rsocket-py/server.py, installed by interop/rsocket-py/setup.sh),
// TCP only.
func TestConformanceRSocketPy(t *testing.T) {
	t.Parallel()
	py := os.Getenv("SLUICE_RSOCKET_PY")
	if py == "" {
		home, _ := os.UserHomeDir()
		py = filepath.Join(home, ".cache", "sluice", "rsocket-py", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		peerMissing(t, fmt.Sprintf("rsocket-py not installed (%v): run interop/rsocket-py/setup.sh or set SLUICE_RSOCKET_PY", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, py, filepath.Join("..", "..", "interop", "rsocket-py", "server.py"), "0")
	ports := startPeer(t, cmd, []string{"tcp"}, jsonListening("tcp"))
	conformsAsPublished(t, ctx, column{"rsocket-py 0.4.20 (tcp)", fmt.Sprintf("tcp://127.0.0.1:%d", ports["tcp"])})
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
