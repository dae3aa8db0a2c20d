package rsocket

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// Resumption in the driver (docs/rsocket-resume.md). The machine
// (conn.Machine) keeps the session, positions and retained frames; the
// driver only swaps transports under it:
//
//   - When a resumable machine loses its transport it emits
//     EventReconnect and produces no output until resumed. The driver
//     closes the lost transport, drops its unwritten output (the machine
//     replays from its retained buffer what the peer lacks) and, on a
//     client, redials with the same dialer.
//   - A new transport is installed under mu while no write is in flight
//     (swapTransport), with a reader of its own; a reader of an earlier
//     transport sees c.transport changed and exits without touching the machine,
//     so a late error or frame of a lost transport never reaches the new
//     link.
//   - Client: Reconnected queues RESUME as the only output. Server: the
//     first frame of a new transport decides: SETUP starts a session
//     (registered in the ResumeStore by token when it asks for resume),
//     RESUME goes to its session's AcceptResume.
//
// By concern: this file is a resumable connection's transport swapping
// (lose, redial, resume) and its session's registration and journal;
// resume_config.go its options (WithResume, the retained-frames budget);
// resume_store.go the ResumeStore contract, its optional capabilities and
// the in-memory store; resume_accept.go a server's first frame of a new
// transport (SETUP, RESUME, a restored session); resume_transport.go the
// dialling and serving of resumable transports.

// ResumeStats counts a resumable connection's transport losses and
// successful resumes.
type ResumeStats struct {
	Lost, Resumed int
}

// ResumeStats returns the connection's resume counters (zero without
// resumption).
func (c *Conn) ResumeStats() ResumeStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resumable == nil {
		return ResumeStats{}
	}
	return c.resumable.stats
}

// resumeConn is a resumable connection's driver state; guarded by c.mu.
type resumeConn struct {
	cfg       ResumeConfig
	dial      func(ctx context.Context) (transport, error) // client
	down      bool                                         // the current transport is lost
	redialing bool                                         // client: redial is running
	stats     ResumeStats
	// client: backoff is the wait before the next redial; it doubles
	// while transports are lost before they resumed (a server that
	// accepts and drops connections must not be redialed in a tight
	// loop) and is reset by a resume. unresumed: the current transport
	// has not resumed yet.
	backoff   time.Duration
	unresumed bool
	// peer (server): the client's identity on the connection that sent
	// the SETUP (ResumeConfig.PeerIdentity); a RESUME must come with the
	// same.
	peer string
	// budget (server, once registered in the store): the shared bound on
	// retained bytes; limit is the bound last applied to the machine.
	budget *retainBudget
	limit  int
	// j (server, with a JournalingResumeStore): the session's journal
	// writer; nil when the session is not journaled.
	j SessionJournal
}

// applyRetainLimit lowers or raises the machine's bound on retained
// frames to the session's current share of the server's budget. Under mu.
func (c *Conn) applyRetainLimit() {
	if c.resumable == nil || c.resumable.budget == nil {
		return
	}
	if l := c.resumable.budget.limit(); l != c.resumable.limit {
		c.resumable.limit = l
		c.machine.SetResumeBufferBytes(l)
	}
}

// transportLost handles EventReconnect: the machine kept the session.
// Under mu.
func (c *Conn) transportLost(err error) {
	r := c.resumable
	if r == nil {
		return
	}
	// Output not yet written is dropped: the machine replays what the
	// peer lacks. writeFailed also makes a failing write in flight on the
	// lost transport a no-op (wrote), not a second loss.
	c.dropOut()
	c.writeFailed = true
	if !r.down {
		r.down = true
		r.stats.Lost++
		old := c.transport
		go func() { _ = old.Close() }() // unblocks its reader and writer; a WebSocket close may wait
		c.opts.log.Info("rsocket: transport lost, resuming", "err", err)
	}
	if c.machine.Resumable() && c.resumable.dial != nil && !r.redialing {
		r.redialing = true
		go c.redial()
	}
}

// resumed handles EventResumed. Under mu.
func (c *Conn) resumed() {
	if c.resumable != nil {
		c.resumable.stats.Resumed++
		c.resumable.backoff, c.resumable.unresumed = 0, false
		c.opts.log.Info("rsocket: resumed")
	}
	if c.machine.LeaseEnabled() {
		// "LEASE semantics MUST be restarted upon a new connection by
		// sending a LEASE frame from the server" (Protocol.md "Resume
		// Operation"): the machine forgot both leases with the lost
		// transport, so each responder grants anew, right after
		// RESUME_OK and the replay. Requests waiting for a lease go out
		// when the peer's LEASE arrives.
		c.grantLease()
	}
}

// lockIdle takes mu once no write is in flight (a write on a lost
// transport ends quickly: transportLost closed it). It returns false,
// without mu, when the connection closed. It waits on idleWait, which
// the write's end (wrote) closes: no polling.
func (c *Conn) lockIdle() bool {
	for {
		c.mu.Lock()
		if c.closed {
			c.release()
			return false
		}
		if !c.writing {
			return true
		}
		if c.idleWait == nil {
			c.idleWait = make(chan struct{})
		}
		wait := c.idleWait
		c.mu.Unlock()
		select {
		case <-wait:
		case <-c.ctx.Done():
		}
	}
}

// swapTransport installs tr as the connection's transport, with a reader
// of its own. Under mu, with no write in flight.
func (c *Conn) swapTransport(tr transport) {
	c.transport = tr
	c.dropOut()
	c.writeFailed = false
	c.writeStalled.Store(false)
	c.resumable.down = false
	go c.readLoop(tr)
}

// redial (client) dials until a transport is up and RESUME is queued on
// it, or the connection closes (Close, session lifetime, rejection).
func (c *Conn) redial() {
	r := c.resumable
	c.mu.Lock()
	// A transport lost before it resumed counts as a failed attempt.
	wait := r.unresumed
	c.mu.Unlock()
	backoff := r.cfg.MinBackoff
	if wait {
		c.mu.Lock()
		backoff = max(r.backoff, r.cfg.MinBackoff)
		c.mu.Unlock()
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 || wait {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-c.done:
				t.Stop()
				return
			}
			backoff = min(2*backoff, r.cfg.MaxBackoff)
		}
		ctx, cancel := context.WithTimeout(c.ctx, r.cfg.DialTimeout)
		tr, err := r.dial(ctx)
		cancel()
		if err != nil {
			if c.ctx.Err() != nil {
				return
			}
			c.opts.log.Debug("rsocket: redial failed", "attempt", attempt+1, "err", err)
			continue
		}
		if !c.lockIdle() {
			_ = tr.Close()
			return
		}
		if !r.down {
			// Cannot happen (only a client redials, once at a time), but a
			// second transport must never replace a live one.
			c.release()
			_ = tr.Close()
			return
		}
		c.swapTransport(tr)
		r.backoff, r.unresumed = backoff, true
		err = c.machine.Reconnected(c.now())
		r.redialing = false
		if err != nil {
			c.opts.log.Warn("rsocket: cannot resume", "err", err)
		}
		c.release()
		return
	}
}

// startResumable is start for resumable connections: it installs the
// driver's resume state before anything runs and, on a server, feeds the
// transport's first frame (already read) to the machine.
func startResumable(ctx context.Context, tr transport, role conn.Role, opts []Option, first []byte, peer string, dial func(context.Context) (transport, error)) (*Conn, error) {
	o := buildOptions(role, opts)
	return startConn(ctx, tr, role, o, func(c *Conn) {
		c.resumable = &resumeConn{cfg: o.resume.cfg, dial: dial, peer: peer}
		if role == conn.Client {
			return
		}
		c.mu.Lock()
		c.machine.Receive(c.now(), first)
		if tok := c.machine.ResumeToken(); tok != nil {
			if err := c.register(o.resume, tok, o.resume.cfg.Store.Add); err != nil {
				_ = c.machine.Close(frame.ErrorCodeRejectedSetup, err.Error())
			}
		}
		c.release()
	})
}

// register adds the server session c under tok with add (the store's
// Add; a RestoringResumeStore's Adopt for a session restored from its
// journal), shares the retained-frames budget with it and, with a
// JournalingResumeStore, starts its journal. When the session ends it
// is forgotten.
func (c *Conn) register(ro *resumeOptions, tok []byte, add func([]byte, *Conn) error) error {
	if err := add(tok, c); err != nil {
		return err
	}
	store := ro.cfg.Store
	tok = clone(tok)
	budget := ro.budget
	budget.sessions.Add(1)
	c.resumable.budget = budget
	var j SessionJournal
	if js, ok := store.(JournalingResumeStore); ok {
		j = js.StartJournal(tok, c.resumable.peer, c.rewriteJournal)
		c.resumable.j = j
	}
	context.AfterFunc(c.ctx, func() {
		c.opts.log.Debug("rsocket: session closed, forgotten", "err", c.Err())
		store.Remove(tok, c)
		budget.sessions.Add(-1)
		if j != nil {
			j.End()
		}
	})
	return nil
}

// persist writes the session's journal record before its output goes
// to the transport (pending). false: the journal's store is closed, and
// nothing more may be sent. Under mu, with c.resumable.j set.
func (c *Conn) persist() bool {
	switch err := c.resumable.j.Record(c.machine); {
	case errors.Is(err, ErrJournalClosed):
		return false
	case errors.Is(err, ErrNotJournaled):
		c.resumable.j = nil
	}
	return true
}

// rewriteJournal is the rewrite of StartJournal: a full image of the
// session in its journal now, then its waiting output sent.
func (c *Conn) rewriteJournal() error {
	c.mu.Lock()
	var err error
	if !c.closed && c.resumable != nil && c.resumable.j != nil {
		if err = c.resumable.j.RecordImage(c.machine); errors.Is(err, ErrNotJournaled) {
			c.resumable.j, err = nil, nil
		}
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.combine()
	return nil
}
