package main

import (
	"bytes"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/seglog"
)

// TestDeadLetterList: `sluice dead-letter list SPOOL` prints one line per
// message set aside (its id, when, the sink's code and detail, its
// records and bytes); with --records it prints the records, one per
// line, ready for `sluice produce`; a letter whose body is no batch is
// named on stderr and the exit status is 1. A message set aside twice
// (a crash before the watermark past it was persisted) is printed once.
// A spool without dead letters says so. `dead-letter clear` removes them,
// and refuses while the agent has the spool open.
func TestDeadLetterList(t *testing.T) {
	dir := t.TempDir()
	sp, err := spool.Open(dir, 0, "agent-test", slog.New(slog.DiscardHandler), seglog.WithSync(seglog.SyncNone()))
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(sluiceBin, append([]string{"dead-letter", "list"}, args...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), code
	}
	if out, errOut, code := run(dir); code != 0 || out != "" || !strings.Contains(errOut, "no dead letters") {
		t.Errorf("empty: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	var b batch.Builder
	for _, r := range []string{`{"a":1}`, `{"a":2}`} {
		if err := b.Add([]byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	body, err := codec.NewEncoder(codec.LevelDefault).Encode(nil, b.Bytes(), codec.Zstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	good := spool.Append(nil, spool.Record{Kind: codec.Zstd, Records: 2, Body: body})
	bad := spool.Append(nil, spool.Record{Kind: codec.Plain, Records: 1, Body: []byte("no batch")})
	if _, err := sp.Log().Append([][]byte{good, bad}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	if _, err := sp.SetAside(0, "ERROR_CODE_OVERSIZE", "payload too large", at); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second time as after a crash before the watermark was persisted
		if _, err := sp.SetAside(1, "ERROR_CODE_BAD_PAYLOAD", "not a batch", at); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := run(dir) // beside the "agent": the spool stays open
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "message 0\tset aside 2026-11-29T05:00:00Z\tERROR_CODE_OVERSIZE\t2 records") ||
		!strings.HasSuffix(lines[0], "payload too large") || !strings.HasPrefix(lines[1], "message 1\t") {
		t.Errorf("list:\n%s", out)
	}
	out, errOut, code = run("--records", dir)
	if out != "{\"a\":1}\n{\"a\":2}\n" {
		t.Errorf("--records printed %q", out)
	}
	if code != 1 || !strings.Contains(errOut, "message 1: its records cannot be read (ERROR_CODE_BAD_PAYLOAD)") {
		t.Errorf("--records: exit %d, stderr %q; want 1 and message 1 named", code, errOut)
	}
	// clear refuses while the spool is open (the agent may be appending),
	// and removes the log once it is not.
	clear := exec.Command(sluiceBin, "dead-letter", "clear", dir)
	if out, err := clear.CombinedOutput(); err == nil || !strings.Contains(string(out), "in use by another sluice process") {
		t.Errorf("clear beside the agent: %v, %s; want a refusal naming the lock", err, out)
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sluiceBin, "dead-letter", "clear", dir).CombinedOutput(); err != nil || string(out) != "removed 2 dead letters\n" {
		t.Errorf("clear: %v, %q; want \"removed 2 dead letters\"", err, out)
	}
	if out, errOut, code := run(dir); code != 0 || out != "" || !strings.Contains(errOut, "no dead letters") {
		t.Errorf("after clear: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, errOut, code := run(t.TempDir()); code != 1 || !strings.Contains(errOut, "is no agent spool") {
		t.Errorf("not a spool: exit %d, %q", code, errOut)
	}
}
