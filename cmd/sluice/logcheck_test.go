package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/dirlock"
	"github.com/sluicehq/sluice/internal/storedmsg"
	"github.com/sluicehq/sluice/seglog"
)

// writeLog creates a log of n records in dir in small segments.
func writeLog(t *testing.T, dir string, n int) {
	t.Helper()
	l, err := seglog.Open(dir, seglog.WithSegmentBytes(4096))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := l.Append([][]byte{[]byte(fmt.Sprintf("record %d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// flipAt xors one byte of a file.
func flipAt(t *testing.T, path string, pos int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[pos] ^= 0xFF
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runLogCheck runs `sluice log check ARGS` and returns its output and exit
// status.
func runLogCheck(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(sluiceBin, append([]string{"log", "check"}, args...)...).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestLogCheckCLI: `sluice log check` reports damage with exit status 1,
// `--repair` quarantines only the damaged record and keeps every other one,
// before and after it, and the log then checks clean.
func TestLogCheckCLI(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, 200)
	// Damage a record in the middle of the first segment: "record 5" is a
	// 32-byte frame at byte 160.
	first := filepath.Join(dir, fmt.Sprintf("%020d.seg", 0))
	flipAt(t, first, 170)

	run := func(args ...string) (string, int) { return runLogCheck(t, args...) }
	out, code := run(dir)
	if code != 1 || !strings.Contains(out, "problem:") || !strings.Contains(out, first) {
		t.Fatalf("check of a damaged log: exit %d\n%s", code, out)
	}
	out, code = run("--repair", dir)
	want := "kept 199 messages, quarantined 32 bytes at offsets 00000000000000000000.seg:160-192 (record offsets [5, 6) lost)"
	if code != 0 || !strings.Contains(out, "quarantined:") || !strings.Contains(out, want) {
		t.Fatalf("repair: exit %d, want %q in\n%s", code, want, out)
	}
	if q, _ := os.ReadDir(filepath.Join(dir, "quarantine")); len(q) == 0 {
		t.Fatal("nothing in quarantine/")
	}
	if out, code = run(dir); code != 0 || !strings.Contains(out, "ok") || !strings.Contains(out, "199 messages") {
		t.Fatalf("check after repair: exit %d\n%s", code, out)
	}
	l, err := seglog.Open(dir)
	if err != nil {
		t.Fatalf("open after repair: %v", err)
	}
	defer l.Close()
	it := l.NewIterator(0, 1<<16)
	for i := 0; it.Next(); i++ {
		if i == 5 {
			i++
		}
		if it.Offset() != uint64(i) || string(it.Value()) != fmt.Sprintf("record %d", i) {
			t.Fatalf("after repair: offset %d = %q, want %d", it.Offset(), it.Value(), i)
		}
	}
	if it.Err() != nil || l.NextOffset() != 200 {
		t.Fatalf("after repair: %v, next %d", it.Err(), l.NextOffset())
	}
	if _, code = run(); code != 2 {
		t.Fatalf("no directory: exit %d, want 2", code)
	}
}

// TestLogCheckFindsTheLog: pointed at an agent's spool or a sink's data
// directory, `log check` checks the log inside it; pointed at a directory
// without a log, it says so and fails instead of reporting "ok".
func TestLogCheckFindsTheLog(t *testing.T) {
	spool, data, empty := t.TempDir(), t.TempDir(), t.TempDir()
	writeLog(t, filepath.Join(spool, "log"), 150)
	writeLog(t, filepath.Join(data, "store"), 150)
	flipAt(t, filepath.Join(data, "store", fmt.Sprintf("%020d.seg", 0)), 170)
	os.MkdirAll(filepath.Join(empty, "log"), 0o755)

	out, code := runLogCheck(t, spool)
	if code != 0 || !strings.Contains(out, filepath.Join(spool, "log")) || !strings.Contains(out, "150 messages") {
		t.Fatalf("check of a spool dir: exit %d\n%s", code, out)
	}
	out, code = runLogCheck(t, data)
	if code != 1 || !strings.Contains(out, filepath.Join(data, "store")) || !strings.Contains(out, "problem:") {
		t.Fatalf("check of a damaged data dir: exit %d\n%s", code, out)
	}
	if out, code = runLogCheck(t, "--repair", data); code != 0 || !strings.Contains(out, "kept 149 messages") {
		t.Fatalf("repair of a data dir: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(data, "store", "quarantine")); err != nil {
		t.Fatalf("quarantine not in the store: %v", err)
	}
	for _, dir := range []string{empty, filepath.Join(empty, "log"), filepath.Join(empty, "missing")} {
		out, code = runLogCheck(t, dir)
		if code == 0 || strings.Contains(out, "\nok") || strings.HasPrefix(out, "ok") {
			t.Fatalf("check of %s without a log: exit %d\n%s", dir, code, out)
		}
	}
	if out, _ = runLogCheck(t, empty); !strings.Contains(out, "no log in") {
		t.Fatalf("check of an empty dir does not say there is no log:\n%s", out)
	}
}

// TestLogCheckLock: while a daemon holds its spool's lock, `log check`
// still reads the log, and `log check --repair` refuses with the lock's
// error, whether given the spool or the log inside it; once the lock is
// free, --repair runs.
func TestLogCheckLock(t *testing.T) {
	spool := t.TempDir()
	logDir := filepath.Join(spool, "log")
	writeLog(t, logDir, 150)
	flipAt(t, filepath.Join(logDir, fmt.Sprintf("%020d.seg", 0)), 170)
	lock, err := dirlock.Acquire(spool, "spool")
	if err != nil {
		t.Fatal(err)
	}
	out, code := runLogCheck(t, spool)
	if code != 1 || !strings.Contains(out, "problem:") || !strings.Contains(out, "in use by a running sluice process") {
		t.Fatalf("read-only check beside a daemon: exit %d\n%s", code, out)
	}
	busy := fmt.Sprintf("spool %s is in use by another sluice process (pid %d)", spool, os.Getpid())
	for _, dir := range []string{spool, logDir} {
		out, code = runLogCheck(t, "--repair", dir)
		if code != 1 || !strings.Contains(out, busy) {
			t.Fatalf("repair of %s while locked: exit %d, want %q in\n%s", dir, code, busy, out)
		}
	}
	if _, err := os.Stat(filepath.Join(logDir, "quarantine")); err == nil {
		t.Fatal("a refused repair quarantined something")
	}
	lock.Release()
	if out, code = runLogCheck(t, "--repair", logDir); code != 0 || !strings.Contains(out, "kept 149 messages") {
		t.Fatalf("repair after the daemon stopped: exit %d\n%s", code, out)
	}
	// The repair held the spool's lock, not one of its own in the log dir.
	if _, err := os.Stat(filepath.Join(logDir, dirlock.FileName)); err == nil {
		t.Fatal("repair locked the log dir instead of the spool")
	}
}

// TestLogCheckCountsRecords: log check names the log's records messages
// and adds up the records inside them from their headers, for a sink's
// store (storedmsg) and an agent's spool (issue 24: it said "13 records"
// where consume counted 12,282).
func TestLogCheckCountsRecords(t *testing.T) {
	write := func(dir string, bodies [][]byte) {
		l, err := seglog.Open(dir, seglog.WithSegmentBytes(4096))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bodies {
			if _, err := l.Append([][]byte{b}); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	data, sp := t.TempDir(), t.TempDir()
	var stored, spooled [][]byte
	for i := range 13 {
		b, err := storedmsg.Append(nil, &storedmsg.Message{Codec: codec.Plain, MessageID: uint64(i + 1), RecordCount: 1000, AgentID: []byte("a"), Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, b)
		spooled = append(spooled, spool.Append(nil, spool.Record{Kind: codec.Plain, Records: uint32(i + 1), Body: []byte("x")}))
	}
	stored = stored[:1] // one message of 1,000 records
	write(filepath.Join(data, "store"), stored)
	write(filepath.Join(sp, "log"), spooled)
	for _, c := range []struct{ dir, want string }{
		{data, ": 1 segment, 1 message (1000 records), "},
		{sp, ": 1 segment, 13 messages (91 records), "},
	} {
		out, code := runLogCheck(t, c.dir)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("log check %s: exit %d, want %q in\n%s", c.dir, code, c.want, out)
		}
	}
}

// TestLogCheckFinalRecord: `sluice log check` answers ok (exit 0) for a
// torn final record and for a damaged one, which the next open handles by
// itself, and names which it is.
func TestLogCheckFinalRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		hurt func(path string, size int64)
		want string
	}{
		{"torn", func(path string, size int64) { os.Truncate(path, size-3) }, "ok: only a torn final record"},
		{"damaged", func(path string, size int64) { flipAt(t, path, size-10) }, "ok: only a damaged final record"},
	} {
		dir := t.TempDir()
		writeLog(t, dir, 20)
		seg := filepath.Join(dir, fmt.Sprintf("%020d.seg", 0))
		fi, err := os.Stat(seg)
		if err != nil {
			t.Fatal(err)
		}
		tc.hurt(seg, fi.Size())
		out, code := runLogCheck(t, dir)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, want 0 and %q in\n%s", tc.name, code, tc.want, out)
		}
	}
}
