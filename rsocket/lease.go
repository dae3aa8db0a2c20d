package rsocket

// LeaseAvailable reports whether a request sent now would go out at once:
// false when lease was negotiated and no LEASE from the peer allows one
// (none yet, expired, or used up), or when the connection is closed. A
// request sent anyway waits for the next LEASE. The balancer
// (rsocket/balance) skips connections that report false.
func (c *Conn) LeaseAvailable() bool {
	ok := false
	_ = c.do(func() error { ok = c.machine.LeaseAvailable(c.now()); return nil })
	return ok
}
