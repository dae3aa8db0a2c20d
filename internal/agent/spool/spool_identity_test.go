package spool

import (
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
	sp, err := Open(dir, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Log().Append([][]byte{[]byte("x")}); err != nil {
		t.Fatal(err)
	}
	id := sp.ID()
	sp.Close()
	if err := os.Remove(filepath.Join(dir, agentIDFile)); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, 0, "", nil)
	if err == nil || !strings.Contains(err.Error(), "no agent-id file") || !strings.Contains(err.Error(), "--agent-id") {
		t.Fatalf("open of a used spool without its agent-id file: %v; want a refusal naming --agent-id", err)
	}
	sp, err = Open(dir, 0, id, nil)
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
