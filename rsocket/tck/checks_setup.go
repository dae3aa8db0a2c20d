package tck

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// Checks of SETUP negotiation, RESUME on an established connection and
// LEASE (issue 22).

// awaitLease waits for a LEASE on stream 0, skipping other frames; an
// ERROR on stream 0 is returned as *connErr.
func (t *T) awaitLease(c *raw, d time.Duration) (frame.Lease, error) {
	for {
		f, err := c.next(d)
		if err != nil {
			return frame.Lease{}, err
		}
		h, _ := frame.ParseHeader(f)
		switch {
		case h.Type == frame.TypeLease && h.StreamID == 0:
			return frame.ParseLease(f)
		case h.Type == frame.TypeError && h.StreamID == 0:
			e, _ := frame.ParseError(f)
			return frame.Lease{}, &connErr{e.Code, e.Message()}
		}
	}
}

// leaseSetup opens a connection whose SETUP has L (and mod) and waits for
// the server's first LEASE. skip says why the check does not apply (the
// server refused the SETUP).
func (t *T) leaseSetup(mod func(*frame.Setup)) (c *raw, l frame.Lease, skip string, err error) {
	c, err = t.dial()
	if err != nil {
		return nil, l, "", err
	}
	if err := c.send(t.setup(func(s *frame.Setup) {
		s.Flags |= frame.FlagLease
		if mod != nil {
			mod(s)
		}
	})); err != nil {
		return nil, l, "", err
	}
	l, err = t.awaitLease(c, t.left())
	var ce *connErr
	if errors.As(err, &ce) {
		return nil, l, fmt.Sprintf("the server refused the SETUP: %v", ce), nil
	}
	if err != nil {
		return nil, l, "", fmt.Errorf("no LEASE after SETUP with L: %v", err)
	}
	return c, l, "", nil
}

// setupLeaseRefused: "If the server does NOT accept the contents of the
// SETUP frame, the server MUST send back an
// ERROR[INVALID_SETUP|UNSUPPORTED_SETUP] and then close the connection."
func setupLeaseRefused(t *T) (Status, string) {
	c, err := t.dial()
	if err != nil {
		return Fail, err.Error()
	}
	if err := c.send(t.setup(func(s *frame.Setup) { s.Flags |= frame.FlagLease })); err != nil {
		return Fail, err.Error()
	}
	l, err := t.awaitLease(c, t.left())
	var ce *connErr
	switch {
	case err == nil:
		return Skip, fmt.Sprintf("the server does lease (LEASE TTL %d ms, %d requests)", l.TTL, l.NumberOfRequests)
	case errors.As(err, &ce) && (ce.code == frame.ErrorCodeInvalidSetup || ce.code == frame.ErrorCodeUnsupportedSetup):
		if st, d := closes(t, c); st != Pass {
			return st, fmt.Sprintf("%v, but %s", ce, d)
		}
		return Pass, fmt.Sprintf("%v, then closed", ce)
	case errors.As(err, &ce):
		return Fail, fmt.Sprintf("SETUP with L: %v (a SETUP the server does not accept MUST get INVALID_SETUP or UNSUPPORTED_SETUP)", ce)
	case errors.Is(err, errTimeout):
		return Fail, fmt.Sprintf("neither LEASE nor ERROR within %v after SETUP with L", t.cfg.Timeout)
	}
	return Fail, fmt.Sprintf("closed without LEASE or ERROR (%v)", err)
}

// setupMinorVersion: "RSocket assumes that all version changes (major and
// minor) are backward incompatible. [...] It is up to a server to accept
// clients of lower versions than what it supports." A 1.1 client speaks
// a version above every published one; a server that accepts it agrees
// to a protocol it cannot know: allowed by the letter, so Warn.
func setupMinorVersion(t *T) (Status, string) {
	e, err := afterSetup(t, func(s *frame.Setup) { s.MajorVersion, s.MinorVersion = 1, 1 })
	switch {
	case err != nil:
		return Fail, "SETUP 1.1: " + err.Error()
	case e == nil:
		return Warn, "SETUP 1.1 was accepted (the spec assumes minor versions are incompatible)"
	case e.code == frame.ErrorCodeInvalidSetup || e.code == frame.ErrorCodeUnsupportedSetup:
		return Pass, e.Error()
	case e.code == frame.ErrorCodeRejectedSetup:
		return Warn, e.Error() + " (the rule names INVALID_SETUP or UNSUPPORTED_SETUP)"
	}
	return Fail, "SETUP 1.1: " + e.Error()
}

// resumeAfterSetup: "A Server that receives a RESUME frame after a SETUP
// frame, SHOULD send an ERROR[CONNECTION_ERROR]." A SHOULD: a server that
// ignores it gets Warn.
func resumeAfterSetup(t *T) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	if err := t.alive(c); err != nil {
		return Fail, "after SETUP: " + err.Error()
	}
	_ = c.send(must(frame.AppendResume(nil, frame.ProtocolMajor, frame.ProtocolMinor, []byte("sluice-tck-resume-after-setup"), 0, 0)))
	e, err := t.awaitConnError(c)
	if errors.Is(err, errTimeout) {
		if t.aliveWithin(c, t.rest()) == nil {
			return Warn, "RESUME after SETUP was ignored: the connection goes on (the rule SHOULD send ERROR[CONNECTION_ERROR])"
		}
		return Warn, "no ERROR after RESUME following SETUP"
	}
	if err != nil {
		return Warn, fmt.Sprintf("closed without ERROR (%v); the rule SHOULD send ERROR[CONNECTION_ERROR]", err)
	}
	if e.code != frame.ErrorCodeConnectionError {
		return Warn, fmt.Sprintf("%v (the rule names CONNECTION_ERROR)", e)
	}
	return Pass, e.Error()
}

// leaseAfterResume: "Leasing semantics are NOT assumed to carry over from
// previous connections when resuming. LEASE semantics MUST be restarted
// upon a new connection by sending a LEASE frame from the server." A
// session with lease and resume; its transport is dropped; a RESUME on a
// new one must be followed by a LEASE within 2 s of RESUME_OK (a LEASE
// that only comes from a renewal timer, later, fails; one whose renewal
// falls within 2 s cannot be told apart).
func leaseAfterResume(t *T) (Status, string) {
	const promptLease = 2 * time.Second
	token := []byte(fmt.Sprintf("sluice-tck-lease-resume-%d", time.Now().UnixNano()))
	c, _, skip, err := t.leaseSetup(func(s *frame.Setup) { s.ResumeToken = token })
	switch {
	case err != nil:
		return Fail, err.Error()
	case skip != "":
		return Skip, skip + " (needs lease and resume)"
	}
	c.close()
	c2, err := t.dial()
	if err != nil {
		return Fail, err.Error()
	}
	// Nothing was sent on a stream either way: both positions are 0.
	if err := c2.send(must(frame.AppendResume(nil, frame.ProtocolMajor, frame.ProtocolMinor, token, 0, 0))); err != nil {
		return Fail, err.Error()
	}
	resumedAt := time.Time{}
	for {
		wait := t.left()
		if !resumedAt.IsZero() {
			// "upon a new connection": with RESUME_OK, not when a renewal
			// timer next fires (rsocket-java-like servers renew at half the
			// TTL, seconds later).
			wait = min(wait, time.Until(resumedAt.Add(promptLease)))
		}
		f, err := c2.next(max(wait, time.Millisecond))
		if errors.Is(err, errTimeout) {
			if resumedAt.IsZero() {
				return Fail, fmt.Sprintf("no RESUME_OK within %v", t.cfg.Timeout)
			}
			return Fail, fmt.Sprintf("RESUME_OK, then no LEASE within %v", time.Since(resumedAt).Round(time.Millisecond))
		}
		if err != nil {
			return Fail, fmt.Sprintf("closed after RESUME (%v)", err)
		}
		h, _ := frame.ParseHeader(f)
		switch {
		case h.Type == frame.TypeResumeOK:
			resumedAt = time.Now()
		case h.Type == frame.TypeLease && h.StreamID == 0:
			if resumedAt.IsZero() {
				return Fail, "LEASE before RESUME_OK"
			}
			l, err := frame.ParseLease(f)
			if err != nil {
				return Fail, "malformed LEASE: " + err.Error()
			}
			return Pass, fmt.Sprintf("LEASE (TTL %d ms, %d requests) %v after RESUME_OK", l.TTL, l.NumberOfRequests, time.Since(resumedAt).Round(time.Millisecond))
		case h.Type == frame.TypeError && h.StreamID == 0:
			e, _ := frame.ParseError(f)
			return Fail, fmt.Sprintf("RESUME of a session with nothing in flight: ERROR[%v] %q", e.Code, e.Message())
		}
	}
}

// leaseExhausted: "A Responder that receives a REQUEST that it can not
// honor due to LEASE restrictions MUST respond with an ERROR[REJECTED]."
// The requests of the first LEASE are used up, then one more is sent: it
// must be REJECTED. (Expiry by TTL cannot be checked from outside against
// a server that renews its leases before they expire.) Needs the echo
// contract and a LEASE of at most 100 requests.
func leaseExhausted(t *T) (Status, string) {
	c, l, skip, err := t.leaseSetup(nil)
	switch {
	case err != nil:
		return Fail, err.Error()
	case skip != "":
		return Skip, skip
	case l.NumberOfRequests > 100:
		return Skip, fmt.Sprintf("the LEASE allows %d requests: too many to use up in a check", l.NumberOfRequests)
	}
	n := int(l.NumberOfRequests)
	var fs [][]byte
	for i := 0; i <= n; i++ {
		fs = append(fs, must(frame.AppendRequestResponse(nil, uint32(2*i+1), 0, nil, []byte("tck-lease"))))
	}
	if err := c.send(fs...); err != nil {
		return Fail, err.Error()
	}
	for i := 0; i <= n; i++ {
		id := uint32(2*i + 1)
		r, err := t.awaitStream(c, id, t.left())
		if err != nil {
			return Fail, fmt.Sprintf("request %d of a LEASE of %d: %v", i+1, n, err)
		}
		switch {
		case i < n && r.err != nil:
			return Fail, fmt.Sprintf("request %d within a LEASE of %d got ERROR[%v] %q", i+1, n, r.err.Code, r.err.Message())
		case i == n && r.err == nil:
			return Fail, fmt.Sprintf("request %d beyond a LEASE of %d was answered", i+1, n)
		case i == n && r.err.Code != frame.ErrorCodeRejected:
			return Fail, fmt.Sprintf("request %d beyond a LEASE of %d got ERROR[%v], want REJECTED", i+1, n, r.err.Code)
		}
	}
	return Pass, fmt.Sprintf("%d requests answered, request %d got ERROR[REJECTED]", n, n+1)
}
