package store

import (
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/seglog"
)

// MkdirDurable creates dir and any missing parents, fsyncing the parent of
// every directory it creates so the new entries survive a crash.
func MkdirDurable(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirDurable(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return err
	}
	return seglog.SyncDir(parent)
}
