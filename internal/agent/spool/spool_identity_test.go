package spool

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingIDOnUsedSpoolRefused: a spool that has delivered (a log, a
// delivery state) and lost its agent-id file is refused at open, with the
// way out, instead of taking a new id silently: under a new id the sink
// stores every unacknowledged message again (found by hand: 200 records
// stored twice). With the old id given, it opens and writes it back.
func TestMissingIDOnUsedSpoolRefused(t *testing.T) {
	dir := t.TempDir()
	id := usedSpool(t, dir, 1)
	if err := os.Remove(filepath.Join(dir, agentIDFile)); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, 0, "", nil)
	if err == nil || !strings.Contains(err.Error(), "no agent-id file") || !strings.Contains(err.Error(), "--agent-id") {
		t.Fatalf("open of a used spool without its agent-id file: %v; want a refusal naming --agent-id", err)
	}
	sp, err := Open(dir, 0, id, nil)
	if err != nil {
		t.Fatalf("open with the old id given: %v", err)
	}
	sp.Close()
	if sp, err = Open(dir, 0, "", nil); err != nil || sp.ID() != id {
		t.Fatalf("reopen: id %q (%v), want %q written back", sp.ID(), err, id)
	}
	sp.Close()
	// A fresh directory still gets a new id.
	if sp, err = Open(t.TempDir(), 0, "", nil); err != nil {
		t.Fatal(err)
	}
	sp.Close()
}

// TestDamagedMetaFiles: a damaged delivery-state never wedges the spool:
// it is moved aside, the spool opens with every message of its log to be
// sent again (the sink drops those it has) and says so; a damaged
// agent-id is refused with the way out (--agent-id), and with it given
// the file is rewritten. Before, both refused to start with a bare
// "corrupt metadata file" and `log check` answered ok (found by hand).
func TestDamagedMetaFiles(t *testing.T) {
	dir := t.TempDir()
	id := usedSpool(t, dir, 3)
	if err := WriteState(dir, 2); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte("SLMTgarbage-garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	sp, err := Open(dir, 0, "", nil)
	if err != nil {
		t.Fatalf("open with a damaged %s: %v", stateFile, err)
	}
	if w := sp.AckedWatermark(); w != 0 || !strings.Contains(strings.Join(sp.Warnings(), "\n"), "is sent again") {
		t.Fatalf("watermark %d, warnings %q; want 0 (every message sent again) and a warning", w, sp.Warnings())
	}
	sp.Close()
	if m, _ := filepath.Glob(filepath.Join(dir, stateFile+".damaged-*")); len(m) != 1 {
		t.Fatalf("the damaged state moved aside: %v", m)
	}

	if err := os.WriteFile(filepath.Join(dir, agentIDFile), []byte("SLMT"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, 0, "", nil); err == nil || !strings.Contains(err.Error(), "--agent-id") {
		t.Fatalf("open with a damaged %s: %v; want a refusal naming --agent-id", agentIDFile, err)
	}
	if sp, err = Open(dir, 0, id, nil); err != nil || sp.ID() != id {
		t.Fatalf("open with the id given: %v", err)
	}
	sp.Close()
	if sp, err = Open(dir, 0, "", nil); err != nil || sp.ID() != id {
		t.Fatalf("reopen after the id was rewritten: %v", err)
	}
	sp.Close()
}

// TestAppendFailureNotReady: an append that fails for another reason
// than a full disk (a segment the directory's permissions do not let it
// create) makes the spool not writable for readiness until its log
// directory takes a file again, instead of ready while every ingest gets
// 500 (found by hand: --spool-quota 4MiB, log/ read-only, /readyz 200).
func TestAppendFailureNotReady(t *testing.T) {
	dir := t.TempDir()
	sp, err := Open(dir, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	logDir, away := filepath.Join(dir, "log"), filepath.Join(dir, "log-away")
	sp.AppendDone(errors.New("seglog: create segment: permission denied"))
	// The directory gone stands for one the agent may not write (root
	// writes a read-only directory).
	if err := os.Rename(logDir, away); err != nil {
		t.Fatal(err)
	}
	if err := sp.Writable(1 << 10); err == nil || !strings.Contains(err.Error(), "the last append failed") {
		t.Fatalf("writable after a failed append, its directory taking no file: %v", err)
	}
	if err := os.Rename(away, logDir); err != nil {
		t.Fatal(err)
	}
	if err := sp.Writable(1 << 10); err != nil {
		t.Fatalf("writable once the directory takes files again: %v", err)
	}
	if err := os.Rename(logDir, away); err != nil {
		t.Fatal(err)
	}
	err = sp.Writable(1 << 10)
	os.Rename(away, logDir)
	if err != nil {
		t.Fatalf("the failure was cleared by the probe, yet: %v", err)
	}
}

// usedSpool opens a new spool in dir, appends n records and closes it; it
// returns the spool's agent id.
func usedSpool(t *testing.T, dir string, n int) string {
	t.Helper()
	sp, err := Open(dir, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	for range n {
		if _, err := sp.Log().Append([][]byte{[]byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	return sp.ID()
}
