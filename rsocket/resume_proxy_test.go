package rsocket

import (
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/faultproxy"
)

// newCutProxy is a fault proxy to upstream whose first n connections are
// cut at random (seeded) offsets: randomCuts.
func newCutProxy(t testing.TB, upstream string, seed uint64, n, maxUp, maxDown int) *faultproxy.Proxy {
	p := faultproxy.New(t, upstream)
	p.CutNext(randomCuts(seed, n, maxUp, maxDown))
	return p
}

// randomCuts cuts each of the next n connections when it has carried a
// random number of bytes client→server in [1, maxUp) or server→client in
// [1, maxDown], whichever first; the proxy's first connection's
// client→server offset is past its SETUP (1024 bytes or more). Bytes
// beyond the offset are lost, as the bytes in flight of a real broken
// link are.
func randomCuts(seed uint64, n, maxUp, maxDown int) faultproxy.Cuts {
	return faultproxy.Cuts{Count: n, Seed: seed, MaxUp: maxUp, MaxDown: maxDown, FirstMinUp: 1024}
}
