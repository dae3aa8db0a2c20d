package rsproxy

import "github.com/prometheus/client_golang/prometheus"

// RegisterMetrics exports p's counters (Stats) to reg as
// sluice_rsocket_proxy_*_total, read at each scrape.
func RegisterMetrics(reg prometheus.Registerer, p *Proxy) {
	counter := func(name, help string, v func(Stats) uint64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v(p.Stats())) }))
	}
	counter("sluice_rsocket_proxy_setups_total", "SETUP frames routed (resumable or not).", func(s Stats) uint64 { return s.Setups })
	counter("sluice_rsocket_proxy_resumes_total", "RESUME frames routed.", func(s Stats) uint64 { return s.Resumes })
	counter("sluice_rsocket_proxy_resumes_remembered_total", "RESUMEs routed where the proxy remembered their SETUP went (the rest by hashing alone).", func(s Stats) uint64 { return s.ResumesRemembered })
	counter("sluice_rsocket_proxy_refused_total", "Connections whose first frame was not SETUP or RESUME, malformed, too long or too late.", func(s Stats) uint64 { return s.Refused })
	counter("sluice_rsocket_proxy_dial_failures_total", "Dials to a server that failed (readiness checks' included).", func(s Stats) uint64 { return s.DialFailures })
	counter("sluice_rsocket_proxy_rejected_setups_total", "SETUPs answered ERROR[REJECTED_SETUP] because no server could be dialled.", func(s Stats) uint64 { return s.RejectedSetups })
}
