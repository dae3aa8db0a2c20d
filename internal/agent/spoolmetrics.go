package agent

import "github.com/prometheus/client_golang/prometheus"

// spoolMetrics are the spool's own failure counters, apart from metrics.go
// so the two can change independently.
type spoolMetrics struct {
	// noSpace counts ingest calls refused because the spool's disk was
	// full (HTTP 507, like the quota, which spool_full_total counts).
	noSpace prometheus.Counter
	// lost counts unacknowledged messages found missing at startup (a
	// repair quarantined them); they are never delivered.
	lost prometheus.Counter
}

func newSpoolMetrics(reg prometheus.Registerer) *spoolMetrics {
	m := &spoolMetrics{
		noSpace: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "agent",
			Name: "spool_no_space_total", Help: "Ingest calls refused because the spool's disk was full (ENOSPC/EDQUOT)."}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "agent",
			Name: "spool_lost_messages_total", Help: "Unacknowledged messages missing from the spool at startup (quarantined by a repair), never delivered."}),
	}
	if reg != nil {
		reg.MustRegister(m.noSpace, m.lost)
	}
	return m
}
