package sink

import (
	"github.com/sluicehq/sluice/internal/protocol"
)

// checkSentBelow refuses a Send session whose agent's spool never sent an
// id that the store holds under its agent id. A spool persists a bound
// above every id it sends before sending it (Hello.SentBelow), so a
// stored id at or above the bound was numbered and sent by another spool
// under the same agent id: a spool recreated or restored from a backup
// under an --agent-id given on the command line, or one id given to two
// agents. This agent's messages with those ids would be acknowledged as
// that spool's duplicates and never stored; refused, they stay in its
// spool until an operator gives it its own id (--change-agent-id).
// Agents that send no bound (before the field, or a spool that lost it)
// are not checked. The caller holds s.dedup's lock.
func (s *Sink) checkSentBelow(h *protocol.Hello) error {
	if !h.HasSentBelow {
		return nil
	}
	held, ok := s.dedup.Highest(h.AgentID)
	if !ok || held < h.SentBelow {
		return nil
	}
	s.m.refused.WithLabelValues(refusedIDsTaken).Inc()
	s.log.Warn("sink: the agent's spool never sent ids this sink holds under its agent id; session refused",
		"agent_id", h.AgentID, "sent_below", h.SentBelow, "held_up_to", held)
	return protocol.Errorf(protocol.StatusFailedPrecondition,
		"%s %q: this sink holds message ids up to %d under it, and this agent's spool has sent only ids below %d: another spool "+
			"numbered and sent them (a spool recreated or restored under the same --agent-id, or the id given to two agents); "+
			"this agent's messages with those ids would be dropped as their duplicates",
		protocol.IDsTakenDetail, h.AgentID, held, h.SentBelow)
}

// checkSentBelowLocked is checkSentBelow taking s.dedup's lock.
func (s *Sink) checkSentBelowLocked(h protocol.Hello) error {
	s.dedup.Lock()
	defer s.dedup.Unlock()
	return s.checkSentBelow(&h)
}
