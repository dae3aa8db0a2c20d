package diskstore

import (
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/xfertest"
)

// env is a store served on every transport, for the tests that drive it
// through real clients.
type env = xfertest.Env[*Uploads]

func startEnv(t *testing.T, o Options) *env {
	t.Helper()
	return xfertest.StartEnv(t, func(dir string) (*Uploads, error) { return Open(dir, o) }, xfertest.AllTransports)
}
