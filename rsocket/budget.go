package rsocket

// Outbound accounting (WithOutboundBudget, WithServerOutboundBudget): how
// many bytes are queued to write (account publishes them to queuedBytes
// and the server's total, under mu), how many of them the peer's frames
// caused (peerOut: the reader stops on those, readOver, not on our own
// requests), and the requests handed to pooled handlers that have not
// finished (held: hold, releaseHeld). Senders and the reader wait for
// room without mu (waitOutbound) on roomWait, which account closes when
// the queue shrinks; the writer needs neither of them, so no wait is
// forever.

// heldSize is what a request held by its handler counts (hold): the
// memory its bytes keep (their capacity: a reassembled payload handed
// over without a copy, conn.Event.Owned, may have grown beyond its
// length), and a little for an empty one, so that a flood of empty
// requests to slow handlers is bounded too.
func heldSize(p Payload) int64 { return int64(cap(p.Metadata)+cap(p.Data)) + 64 }

// hold counts n bytes of a request handed to a handler (held). Under mu.
func (c *Conn) hold(n int64) {
	c.held.Add(n)
	if b := c.opts.sharedOut; b != nil {
		b.add(n)
	}
}

// releaseHeld ends hold(n) once the handler is done, from its goroutine. A
// reader waiting for room must see held shrink: account, run under mu
// by the command posted here, wakes it (the reader sets readerWaiting before it
// checks readOver, so either it sees the new held or we see readerWaiting).
func (c *Conn) releaseHeld(n int64) {
	c.held.Add(-n)
	if b := c.opts.sharedOut; b != nil {
		b.add(-n)
	}
	if c.readerWaiting.Load() {
		c.post(noop)
	}
}

// account publishes the queued output, its bytes (len(out) plus the
// write in flight) to queuedBytes for the connection's budget and its
// memory (queueMemory) to the server's total, and wakes those waiting
// for room when it shrank. Under mu; it costs nothing when the queue is
// as it was last time (a request answered by a direct write).
func (c *Conn) account() {
	n := int64(c.queued() + c.inflight)
	if c.peerOut > int(n) { // the queue was dropped (a failed write, a lost transport)
		c.peerOut = int(n)
	}
	if c.peerOut != c.peerOutPublished {
		c.peerOutPublished = c.peerOut
		c.peerOutBytes.Store(int64(c.peerOut))
	}
	if h := c.held.Load(); h != c.heldSeen {
		if h < c.heldSeen && c.roomWait != nil {
			close(c.roomWait)
			c.roomWait = nil
		}
		c.heldSeen = h
	}
	mem, was := c.queueMemory(), c.queuedBytes.Load()
	if mem == c.counted && n == was {
		return
	}
	if b := c.opts.sharedOut; b != nil {
		b.add(mem - c.counted)
	}
	shrank := mem < c.counted || n < was
	c.counted = mem
	c.queuedBytes.Store(n)
	if shrank && c.roomWait != nil {
		close(c.roomWait)
		c.roomWait = nil
	}
}

// queueMemory is the memory the output queue and the write in flight
// hold (bufMemory): the server's budget counts what a flood costs, not
// only the bytes to write, so a queue grown into a larger buffer is
// charged its room to spare too. (A connection's own budget counts
// bytes: its bound, the budget plus one frame, is in bytes.) Under mu.
func (c *Conn) queueMemory() int64 {
	mem := bufMemory(c.out) + c.inflightMem
	for _, p := range c.outFront {
		mem += p.memory()
	}
	return int64(mem)
}

// markRead moves peerOut to the end of the queue if output the peer's frames
// caused was added (peerOutAdded). Under mu, right after a drain.
func (c *Conn) markRead() {
	if c.peerOutAdded {
		c.peerOut, c.peerOutAdded = c.queued()+c.inflight, false
	}
}

// readOver is overBudget for the reader: on the queue through the last
// output the peer's frames caused (peerOut), not on our own requests, plus the
// requests its handlers hold (held).
func (c *Conn) readOver() bool {
	q := c.peerOutBytes.Load() + c.held.Load()
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
	q := c.queuedBytes.Load()
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
		c.readerWaiting.Store(true)
		defer c.readerWaiting.Store(false)
	} else {
		c.sendersWaiting.Add(1)
		defer c.sendersWaiting.Add(-1)
	}
	for {
		c.mu.Lock()
		if c.closed || (tr != nil && c.transport != tr) {
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
		if c.roomWait == nil {
			c.roomWait = make(chan struct{})
		}
		w := c.roomWait
		c.mu.Unlock()
		c.combine()
		select {
		case <-w:
		case <-c.done:
		}
	}
}
