package rsocket

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/rsocket/conn"
)

// SendBatch sends ps in order, like Send for each but cheaper: as many as
// the peer's credits allow are encoded under one hold of the connection
// and leave in one write, so a responder streaming small payloads costs
// one lock round and one wake-up of the writer per batch instead of per
// payload. It waits for credits as Send does and fails as Send does,
// returning how many of ps were sent. The payloads' bytes are copied
// before it returns: ps may be reused.
func (s *Sink) SendBatch(ps []Payload) (sent int, err error) {
	for sent < len(ps) {
		if s.c.overBudget() && !s.c.waitOutbound(nil) {
			// Credits alone do not bound a stream (see send): each batch
			// waits for outbound room too, so a peer that grants 2^31-1
			// and reads nothing holds the stream at the budget.
			return sent, s.c.closedErr()
		}
		n, err := s.sendSome(ps[sent:])
		sent += n
		if err != nil {
			return sent, err
		}
		if n == 0 {
			// No credits: wait for one the way Send does, then go on in
			// batches with what the peer granted.
			if err := s.Send(ps[sent]); err != nil {
				return sent, err
			}
			sent++
		}
	}
	return sent, nil
}

// sendSome sends ps[:n] while credits last.
func (s *Sink) sendSome(ps []Payload) (n int, err error) {
	c, st := s.c, s.st
	c.mu.Lock()
	defer func() {
		c.unlock(false) // a batch: the writer writes it while we make the next
		c.combine()
	}()
	if c.closed {
		return 0, c.closedErr()
	}
	if c.streams[st.id] != st || st.sendDone {
		return 0, fmt.Errorf("rsocket: stream %d is over: %w", st.id, context.Canceled)
	}
	for n < len(ps) {
		err := c.machine.SendPayload(st.id, ps[n].Metadata, ps[n].Data, true, false)
		if errors.Is(err, conn.ErrNoCredits) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
