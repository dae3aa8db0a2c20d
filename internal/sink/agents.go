package sink

import (
	"fmt"
	"sort"
	"time"

	"github.com/sluicehq/sluice/internal/logutil"
)

// maxAgentsSeen bounds the agents the sink remembers for Agents: past it,
// the agent gone longest is forgotten (a fleet that churns agent ids must
// not grow the sink's memory).
const maxAgentsSeen = 4096

// AgentActivity is one agent as this sink has seen it since it started:
// what the status page shows per agent.
type AgentActivity struct {
	ID string
	// Vouched names the credentials that proved the id ("token",
	// "certificate", "token+certificate"); "" when the sink has no
	// authentication and the id is only what the agent says.
	Vouched string
	// Connected is the number of its Send sessions open now.
	Connected int
	// Records newly stored and Duplicates (messages received again after
	// being stored), over every session since the sink started.
	Records, Duplicates uint64
	// LastSeen is now while connected, else when its last session ended.
	LastSeen time.Time
}

// agentSeen is what the sink keeps of an agent between its sessions.
type agentSeen struct {
	vouched             string
	connected           int
	records, duplicates uint64 // of its sessions that ended
	lastSeen            time.Time
	// replacedWarned: when the sink last logged one of its sessions
	// replaced by a newer one (addSendStream), to log that once a minute.
	replacedWarned logutil.Every
}

// seen returns the agent's entry, making it (and forgetting the agent
// gone longest when full). Under statusMu.
func (s *Sink) seen(agent string) *agentSeen {
	if a := s.agentsSeen[agent]; a != nil {
		return a
	}
	if len(s.agentsSeen) >= maxAgentsSeen {
		var oldest string
		var at time.Time
		for id, a := range s.agentsSeen {
			if a.connected == 0 && (oldest == "" || a.lastSeen.Before(at)) {
				oldest, at = id, a.lastSeen
			}
		}
		delete(s.agentsSeen, oldest) // all connected: the limit is exceeded by the open sessions only
	}
	a := &agentSeen{}
	s.agentsSeen[agent] = a
	return a
}

// Agents lists every agent seen since the sink started (at most
// maxAgentsSeen), by id.
func (s *Sink) Agents() []AgentActivity {
	now := time.Now()
	s.statusMu.Lock()
	out := make([]AgentActivity, 0, len(s.agentsSeen))
	idx := make(map[string]int, len(s.agentsSeen))
	for id, a := range s.agentsSeen {
		idx[id] = len(out)
		out = append(out, AgentActivity{ID: id, Vouched: a.vouched, Connected: a.connected,
			Records: a.records, Duplicates: a.duplicates, LastSeen: a.lastSeen})
	}
	for st := range s.sendStreams {
		r, d := st.acks.Counts()
		if i, ok := idx[st.agent]; ok {
			out[i].Records += r
			out[i].Duplicates += d
			out[i].LastSeen = now
		}
	}
	s.statusMu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// noteError keeps the newest failure the error counters counted, in
// words, for LastError.
func (s *Sink) noteError(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.statusMu.Lock()
	s.lastErr, s.lastErrAt = msg, time.Now()
	s.statusMu.Unlock()
}

// LastError is the newest failure counted by sluice_sink_store_errors_total,
// _rejected_total, _streams_cut_total or _refused_total, in words, and
// when it happened ("" before any).
func (s *Sink) LastError() (string, time.Time) {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	return s.lastErr, s.lastErrAt
}
