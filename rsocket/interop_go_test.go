package rsocket_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInteropRSocketGo runs interop/rsocket-go, a module of its own that
// tests this package against rsocket-go v0.8.16 in both directions, so
// that rsocket-go never becomes a dependency of sluice. The module is
// copied to a temporary directory with its replace directive pointing
// here, so no tracked file changes. It needs rsocket-go in the module
// cache or a reachable Go proxy.
//
// The rsocket-go rows of the table in docs/rsocket-interop.md are
// generated from the run's per-case results with SLUICE_INTEROP_UPDATE=1;
// a normal run checks that they list every case with this run's result
// (interopdoc_test.go).
func TestInteropRSocketGo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the interop run builds another module")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot run the interop module")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(root, "interop", "rsocket-go")
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "go.mod" {
			if !bytes.Contains(b, []byte("=> ../..")) {
				t.Fatal("interop/rsocket-go/go.mod must replace github.com/sluicehq/sluice with ../..")
			}
			b = bytes.ReplaceAll(b, []byte("=> ../.."), []byte("=> "+root))
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	results := filepath.Join(t.TempDir(), "results")
	// Every case has its own 20 s timeout; this bounds the build and run.
	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "test", "-count=1", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "RSOCKET_INTEROP_RESULTS="+results)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test in interop/rsocket-go: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(results)
	if err != nil {
		t.Fatalf("the interop run wrote no results: %v\n%s", err, out)
	}
	rows := &interopRows{peer: "rsocket-go"}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 4 {
			t.Fatalf("bad result line %q", line)
		}
		note := ""
		if f[3] == "documented peer bug" {
			note = "rsocket-go v0.8.16 sets C on the first fragment of a fragmented PAYLOAD (see below)"
		}
		rows.add(f[0], f[1], f[2], f[3], note)
		n++
	}
	rows.check(t, n)
}
