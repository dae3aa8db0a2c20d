package rsocket

// heldSize is what a request held by its handler counts (hold): its
// bytes, and a little for an empty one, so that a flood of empty requests
// to slow handlers is bounded too.
func heldSize(p Payload) int64 { return int64(len(p.Metadata)+len(p.Data)) + 64 }

// hold counts n bytes of a request handed to a handler (held). Under mu.
func (c *Conn) hold(n int64) {
	c.held.Add(n)
	if b := c.opts.sharedOut; b != nil {
		b.add(n)
	}
}

// releaseHeld ends hold(n) once the handler is done, from its goroutine. A
// reader waiting for room must see held shrink: account, run under mu
// by the command posted here, wakes it (the reader sets rwait before it
// checks readOver, so either it sees the new held or we see rwait).
func (c *Conn) releaseHeld(n int64) {
	c.held.Add(-n)
	if b := c.opts.sharedOut; b != nil {
		b.add(-n)
	}
	if c.rwait.Load() {
		c.post(noop)
	}
}

// account publishes the queued output (len(out) plus the write in
// flight) to qbytes and the server's total, and wakes those waiting for
// room when it shrank. Under mu; it costs nothing when the queue is as
// it was last time (a request answered by a direct write).
func (c *Conn) account() {
	q := int64(len(c.out) + c.inflight)
	if c.rq > int(q) { // the queue was dropped (a failed write, a lost transport)
		c.rq = int(q)
	}
	if c.rq != c.rqpub {
		c.rqpub = c.rq
		c.rqbytes.Store(int64(c.rq))
	}
	if h := c.held.Load(); h != c.heldSeen {
		if h < c.heldSeen && c.bwait != nil {
			close(c.bwait)
			c.bwait = nil
		}
		c.heldSeen = h
	}
	if q == c.counted {
		return
	}
	if b := c.opts.sharedOut; b != nil {
		b.add(q - c.counted)
	}
	shrank := q < c.counted
	c.counted = q
	c.qbytes.Store(q)
	if shrank && c.bwait != nil {
		close(c.bwait)
		c.bwait = nil
	}
}

// markRead moves rq to the end of the queue if output the peer's frames
// caused was added (rmark). Under mu, right after a drain.
func (c *Conn) markRead() {
	if c.rmark {
		c.rq, c.rmark = len(c.out)+c.inflight, false
	}
}

// readOver is overBudget for the reader: on the queue through the last
// output the peer's frames caused (rq), not on our own requests, plus the
// requests its handlers hold (held).
func (c *Conn) readOver() bool {
	q := c.rqbytes.Load() + c.held.Load()
	if q > c.opts.outBudget {
		return true
	}
	b := c.opts.sharedOut
	return b != nil && q > 0 && b.total.Load() > b.limit
}

// overBudget reports whether the connection is over its outbound budget,
// or has output queued while its server is over the server's: then only
// connections with nothing queued read (one batch each), so the server's
// total stays within its budget plus one batch per connection.
func (c *Conn) overBudget() bool {
	q := c.qbytes.Load()
	if q > c.opts.outBudget {
		return true
	}
	b := c.opts.sharedOut
	return b != nil && q > 0 && b.total.Load() > b.limit
}

// waitOutbound waits, without mu, until the connection is within its
// budget; the reader passes its transport, others nil. It returns false
// if the connection closed (or, for the reader, tr was replaced).
//
// The queue shrinks only by writes, which need neither the reader nor
// the waiting senders: the writer takes mu only briefly, and mu is never
// held while waiting. A connection over budget has output queued, so a
// write is in flight or about to be, and it either progresses (account
// wakes us) or fails (the peer gone, or the write timeout): no wait is
// forever.
func (c *Conn) waitOutbound(tr transport) bool {
	if tr != nil {
		c.rwait.Store(true)
		defer c.rwait.Store(false)
	} else {
		c.swait.Add(1)
		defer c.swait.Add(-1)
	}
	for {
		c.mu.Lock()
		if c.closed || (tr != nil && c.tr != tr) {
			c.mu.Unlock()
			c.combine()
			return false
		}
		over := c.overBudget()
		if tr != nil {
			over = c.readOver()
		}
		if !over {
			c.mu.Unlock()
			c.combine()
			return true
		}
		if c.bwait == nil {
			c.bwait = make(chan struct{})
		}
		w := c.bwait
		c.mu.Unlock()
		c.combine()
		select {
		case <-w:
		case <-c.done:
		}
	}
}
