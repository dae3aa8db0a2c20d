package rsocket

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"

	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// serveResumable serves one transport of a resumable listener: its first
// frame is a SETUP (a new connection) or a RESUME (for a session of the
// store). readFirst reads that frame within firstFrameTimeout. tlsState is
// the transport's TLS state (nil: none), whose client identity a RESUME
// must share with its SETUP.
func serveResumable(ctx context.Context, tr transport, readFirst func() ([]byte, error), tlsState *tls.ConnectionState, r Responder, opts []Option) {
	o := buildOptions(conn.Server, opts)
	f, err := readFirst()
	if err != nil {
		o.log.Debug("rsocket: no first frame", "err", err)
		_ = tr.Close()
		return
	}
	if ctx.Err() != nil {
		// The server is stopping: its sessions' transports are being
		// dropped, and their clients redial at once, some before the
		// listener is closed. No answer, so that they resume on the
		// next server (the journal's sessions) instead of on this one,
		// which would drop them again.
		_ = tr.Close()
		return
	}
	f = clone(f) // the reader reuses its buffer
	peer := o.resume.cfg.peerIdentity(tlsState)
	h, err := frame.ParseHeader(f)
	if err != nil || h.Type != frame.TypeResume {
		// SETUP or garbage: the machine answers either.
		if _, err := startResumable(ctx, tr, conn.Server, append([]Option{WithResponder(r)}, opts...), f, peer, nil); err != nil {
			o.log.Warn("rsocket: cannot serve connection", "err", err)
		}
		return
	}
	token, err := conn.ResumeToken(f)
	var (
		c       *Conn
		dormant *DormantSession // a session of a restarted server's journal
		busy    bool            // ...that another connection is restoring
	)
	rs, restoring := o.resume.cfg.Store.(RestoringResumeStore)
	switch {
	case err != nil:
	case restoring:
		c, dormant, busy = rs.ResumeTarget(token)
	default:
		c = o.resume.cfg.Store.Lookup(token)
	}
	msg := "unknown resume token"
	switch {
	case err != nil:
		msg = err.Error()
	case busy:
		// Another connection of this client is restoring the session
		// right now: no answer, so that the client redials and finds it
		// live (a REJECTED_RESUME would end it).
		_ = tr.Close()
		return
	case dormant != nil && dormant.Peer != peer || c != nil && c.resumable != nil && c.resumable.peer != peer:
		// Not the client that set the session up: refuse this
		// connection, and leave the session to its owner.
		if dormant != nil {
			rs.Release(token)
		}
		o.log.Warn("rsocket: RESUME refused: the client's TLS identity differs from its SETUP's")
		msg = "resume from another client identity"
	case dormant != nil:
		if restoreSession(ctx, tr, f, dormant, rs, r, opts) {
			return
		}
		msg = "session could not be restored"
	case c == nil:
		o.log.Debug("rsocket: RESUME for no session in the store")
	default:
		if c.acceptResume(tr, f) {
			return
		}
	}
	rejectResume(tr, msg)
}

// acceptResume resumes c's session over tr, whose first frame was the
// RESUME f. false: c is closed (tr is not used).
func (c *Conn) acceptResume(tr transport, f []byte) bool {
	if c.resumable == nil || !c.lockIdle() {
		return false
	}
	if !c.resumable.down {
		// Half-open: the client gave up on the old transport before we
		// noticed. It is lost now.
		c.machine.TransportClosed(errors.New("rsocket: replaced by a resumed connection"))
		c.drain()
		if c.closed || !c.resumable.down {
			c.opts.log.Debug("rsocket: half-open session could not be taken over", "closed", c.closed, "down", c.resumable.down, "err", c.err)
			c.release()
			return false
		}
	}
	c.swapTransport(tr)
	// A rejection (positions the retained buffer cannot satisfy) is
	// answered by the machine: ERROR[REJECTED_RESUME] on tr, then the
	// session closes and every stream fails.
	c.machine.AcceptResume(c.now(), f)
	c.release()
	return true
}

// restoreSession rebuilds the dormant session d of a restarted server
// (conn.Restore) over tr, whose first frame was the RESUME f, and
// resumes it. false: it could not be restored (tr is not used).
func restoreSession(ctx context.Context, tr transport, f []byte, d *DormantSession, rs RestoringResumeStore, r Responder, opts []Option) bool {
	o := buildOptions(conn.Server, append([]Option{WithResponder(r)}, opts...))
	m, err := conn.Restore(o.cfg, d.Image, 0)
	if err != nil {
		o.log.Warn("rsocket: journal session not restorable", "err", err)
		rs.Drop(d.Image.Token)
		return false
	}
	if d.Image.Lease && !o.lease {
		o.log.Warn("rsocket: journal session used leases, this server has none")
		rs.Drop(d.Image.Token)
		return false
	}
	var regErr error
	_, err = startConn(ctx, tr, conn.Server, o, func(c *Conn) {
		c.machine = m
		c.resumable = &resumeConn{cfg: o.resume.cfg, peer: d.Peer}
		c.mu.Lock()
		// The dormant session becomes this one (Adopt, not Add).
		if regErr = c.register(o.resume, d.Image.Token, rs.Adopt); regErr != nil {
			_ = c.machine.Close(frame.ErrorCodeRejectedResume, regErr.Error())
			c.release()
			return
		}
		close(c.setup)
		// The first record of the restored session is a full image, in
		// takeOut before RESUME_OK and the replay go out.
		c.machine.AcceptResume(c.now(), f)
		c.release()
	})
	if err != nil || regErr != nil {
		o.log.Warn("rsocket: cannot serve a restored session", "err", cmp.Or(err, regErr))
		rs.Release(d.Image.Token) // the next RESUME may try again
		return err == nil         // a registration failure was answered on tr
	}
	o.log.Info("rsocket: session restored from the resume journal")
	return true
}

// rejectResume answers a RESUME that has no session.
func rejectResume(tr transport, msg string) {
	out := frame.ReserveLengthPrefix(nil)
	out, err := frame.AppendError(out, 0, frame.ErrorCodeRejectedResume, msg)
	if err == nil && frame.SetLengthPrefix(out, 0) == nil {
		_ = tr.writeFrames(out)
	}
	_ = tr.Close()
}

// newResumeToken returns 16 random bytes.
func newResumeToken() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return b
}
