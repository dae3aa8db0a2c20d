package spool

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the spool's own failure counters, apart from the agent's
// so the two can change independently.
type Metrics struct {
	// NoSpace counts ingest calls refused because the spool's disk was
	// full (HTTP 507, like the quota, which spool_full_total counts).
	NoSpace prometheus.Counter
	// Lost counts unacknowledged messages found missing at startup (a
	// repair quarantined them); they are never delivered.
	Lost prometheus.Counter
}

func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		NoSpace: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "agent",
			Name: "spool_no_space_total", Help: "Ingest calls refused because the spool's disk was full (ENOSPC/EDQUOT)."}),
		Lost: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "agent",
			Name: "spool_lost_messages_total", Help: "Unacknowledged messages missing from the spool at startup (quarantined by a repair), never delivered."}),
	}
	if reg != nil {
		reg.MustRegister(m.NoSpace, m.Lost)
	}
	return m
}
