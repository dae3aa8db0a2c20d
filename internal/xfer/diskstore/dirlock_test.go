package diskstore

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/dirlock"
)

// TestRefusesAnotherDaemonsDirectory: xfer serve's --dir locked by
// another sluice daemon (an agent's spool, a sink's data) is refused:
// uploads named LOCK or agent-id would replace that daemon's files.
// Before, it served it (found by hand: a second agent then started on the
// spool whose LOCK an upload had replaced).
func TestRefusesAnotherDaemonsDirectory(t *testing.T) {
	dir := t.TempDir()
	lock, err := dirlock.Acquire(dir, "spool")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "in use by another sluice process") {
		t.Fatalf("open of a directory another daemon holds: %v", err)
	}
	lock.Release()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open once it is released: %v", err)
	}
	s.Close()
}
