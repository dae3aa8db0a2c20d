package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/seglog"
)

// TestLogCheckCLI: `sluice log check` reports damage with exit status 1,
// `--repair` quarantines it and keeps the good records, and the log then
// checks clean.
func TestLogCheckCLI(t *testing.T) {
	dir := t.TempDir()
	l, err := seglog.Open(dir, seglog.WithSegmentBytes(4096))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if _, err := l.Append([][]byte{[]byte(fmt.Sprintf("record %d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	// Damage a record in the middle of the first segment.
	first := filepath.Join(dir, fmt.Sprintf("%020d.seg", 0))
	f, _ := os.OpenFile(first, os.O_RDWR, 0)
	f.WriteAt([]byte{0xFF}, 200)
	f.Close()

	run := func(args ...string) (string, int) {
		out, err := exec.Command(sluiceBin, append([]string{"log", "check"}, args...)...).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run(dir)
	if code != 1 || !strings.Contains(out, "problem:") || !strings.Contains(out, first) {
		t.Fatalf("check of a damaged log: exit %d\n%s", code, out)
	}
	out, code = run("--repair", dir)
	if code != 0 || !strings.Contains(out, "quarantined:") {
		t.Fatalf("repair: exit %d\n%s", code, out)
	}
	if q, _ := os.ReadDir(filepath.Join(dir, "quarantine")); len(q) == 0 {
		t.Fatal("nothing in quarantine/")
	}
	if out, code = run(dir); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("check after repair: exit %d\n%s", code, out)
	}
	if _, code = run(); code != 2 {
		t.Fatalf("no directory: exit %d, want 2", code)
	}
}
