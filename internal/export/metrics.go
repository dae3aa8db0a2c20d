package export

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the exporters' Prometheus metrics, one series per exporter
// (label exporter: Target.Name). Create them once per registry.
type Metrics struct {
	requests *prometheus.CounterVec
	records  *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	lag      *prometheus.GaugeVec
	rejected *prometheus.CounterVec
}

// Reasons of sluice_export_errors_total.
const (
	// reasonRetried: an attempt the receiver did not take (5xx, 429, no
	// answer); the request is sent again.
	reasonRetried = "retried"
	// reasonPoison: a record the receiver refused with a 4xx, skipped.
	reasonPoison = "poison"
	// reasonUnreadable: a stored message or marked record that cannot be
	// decoded, skipped.
	reasonUnreadable = "unreadable"
	// reasonStore: the store failed under the exporter (its position
	// could not be read or committed); it starts again after a back-off.
	reasonStore = "store"
)

// NewMetrics registers the exporters' metrics in reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	by := []string{"exporter"}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_export_requests_total",
			Help: "Requests the exporter's receiver accepted (2xx): one per marked record."}, by),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_export_messages_total",
			Help: "Stored messages the exporter has gone past (exported or holding nothing for it)."}, by),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_export_sent_bytes_total",
			Help: "Request body bytes the receiver accepted, as sent (snappy for remote-write)."}, by),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_export_errors_total",
			Help: "Failures of the exporter: retried (an attempt the receiver did not take), poison (a record refused with a 4xx, skipped), unreadable (a record that cannot be decoded, skipped), store (the store failed under the exporter; it starts again)."},
			[]string{"exporter", "reason"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_export_rejected_items_total",
			Help: "Items (data points, log records, spans) an OTLP receiver took the request of but rejected (partial success); not sent again, as OTLP says."}, by),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_export_lag_messages",
			Help: "Stored messages the exporter has not gone past yet."}, by),
	}
	reg.MustRegister(m.requests, m.records, m.bytes, m.errors, m.lag, m.rejected)
	return m
}
