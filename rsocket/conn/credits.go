package conn

import "github.com/sluicehq/sluice/rsocket/frame"

// credits counts REQUEST_N credits of one direction of one stream.
//
// Invariant: 0 <= credits <= frame.MaxRequestN. Grants add and saturate at
// 2^31-1; every PAYLOAD with the N flag takes one. 2^31-1 is a number of
// items, never "unbounded": the count keeps decreasing, and a stream that
// used them all waits for more (Protocol.md "Reactive Streams Semantics").
type credits uint32

// grant adds n credits, saturating at frame.MaxRequestN.
func (c *credits) grant(n uint32) {
	s := uint64(*c) + uint64(n)
	if s > frame.MaxRequestN {
		s = frame.MaxRequestN
	}
	*c = credits(s)
}

// take consumes one credit; false when none is left.
func (c *credits) take() bool {
	if *c == 0 {
		return false
	}
	*c--
	return true
}
