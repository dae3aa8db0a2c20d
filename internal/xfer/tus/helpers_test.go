package tus_test

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/sluicehq/sluice/internal/dirlock"
	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/internal/xfer/serve"
)

func openT(t *testing.T, dir string, o diskstore.Options) *diskstore.Uploads {
	t.Helper()
	return xfertest.Open(t, func() (*diskstore.Uploads, error) { return diskstore.Open(dir, o) })
}

// env is a store served over tus as `sluice xfer serve --tus` serves it.
type env = xfertest.Env[*diskstore.Uploads]

func startEnv(t *testing.T, o diskstore.Options) *env {
	t.Helper()
	return xfertest.StartEnv(t, func(dir string) (*diskstore.Uploads, error) { return diskstore.Open(dir, o) }, serve.Listen{TUS: "127.0.0.1:0"})
}

func sha256Of(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// partialFiles lists DIR/.partial but for its lock.
func partialFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(dir, diskstore.PartialDir))
	var names []string
	for _, e := range ents {
		if e.Name() != dirlock.FileName {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}
