package status

import (
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Kind is the daemon a page describes.
type Kind string

const (
	KindAgent Kind = "agent"
	KindSink  Kind = "sink"
	KindXfer  Kind = "xfer"
)

// Metric is one Prometheus metric a Snapshot field is built from.
type Metric struct {
	Kind    Kind
	Name    string
	Section string // the page section (and status.detail section) it feeds
	Field   string // the Snapshot field, as in its JSON
}

// Metrics are the metric names the snapshots depend on: the one place
// that couples this package to the daemons' metric names. TestMetricsExist
// gathers a real agent's and sink's registry and checks each is there.
var Metrics = []Metric{
	{KindAgent, "sluice_agent_acked_records_total", "throughput", "throughput.records"},
	{KindAgent, "sluice_agent_message_bytes_uncompressed_total", "throughput", "throughput.rawBytes"},
	{KindAgent, "sluice_agent_message_bytes_compressed_total", "throughput", "throughput.wireBytes"},
	{KindAgent, "sluice_agent_ingested_records_total", "throughput", "throughput.ingestedRecords"},
	{KindAgent, "sluice_agent_sink_up", "agent", "agent.sinkUp"},
	{KindAgent, "sluice_agent_inflight_messages", "agent", "agent.inflightMessages"},
	{KindAgent, "sluice_agent_inflight_bytes", "agent", "agent.inflightBytes"},
	{KindAgent, "sluice_agent_window_messages", "agent", "agent.windowMessages"},
	{KindAgent, "sluice_agent_window_bytes", "agent", "agent.windowBytes"},
	{KindAgent, "sluice_agent_srtt_seconds", "agent", "agent.rttSeconds"},
	{KindAgent, "sluice_agent_spool_bytes", "agent", "agent.spoolBytes"},
	{KindAgent, "sluice_agent_resent_messages_total", "agent", "agent.resent"},
	{KindAgent, "sluice_agent_resend_timeouts_total", "agent", "agent.timeouts"},
	{KindAgent, "sluice_agent_reconnects_total", "agent", "agent.reconnects"},
	{KindAgent, "sluice_agent_parked_messages", "agent", "agent.parked"},
	{KindAgent, "sluice_agent_dead_letter_messages", "agent", "agent.deadLetters"},
	{KindAgent, "sluice_agent_connect_failures_total", "errors", "errors.total"},
	{KindAgent, "sluice_agent_rejected_messages_total", "errors", "errors.total"},
	{KindAgent, "sluice_agent_spool_full_total", "errors", "errors.total"},
	{KindAgent, "sluice_agent_last_error", "errors", "errors.last"},
	{KindAgent, "sluice_agent_oldest_unacked_seconds", "agent", "agent.oldestUnackedSeconds"},

	{KindSink, "sluice_sink_stored_records_total", "throughput", "throughput.records"},
	{KindSink, "sluice_sink_received_decoded_bytes_total", "throughput", "throughput.rawBytes"},
	{KindSink, "sluice_sink_received_bytes_total", "throughput", "throughput.wireBytes"},
	{KindSink, "sluice_sink_streams", "sink", "sink.agents, sink.readers"},
	{KindSink, "sluice_sink_consumers", "sink", "sink.consumers"},
	{KindSink, "sluice_sink_queued_messages", "sink", "sink.queuedMessages"},
	{KindSink, "sluice_sink_queued_bytes", "sink", "sink.queuedBytes"},
	{KindSink, "sluice_sink_duplicate_messages_total", "sink", "sink.duplicates"},
	{KindSink, "sluice_sink_store_available", "sink", "sink.storeAvailable"},
	{KindSink, "sluice_sink_store_outages_total", "sink", "sink.storeOutages"},
	{KindSink, "sluice_sink_stored_bytes_total", "sink", "sink.storedBytes"},
	{KindSink, "sluice_sink_store_errors_total", "errors", "errors.total"},
	{KindSink, "sluice_sink_rejected_total", "errors", "errors.total"},
	{KindSink, "sluice_sink_streams_cut_total", "errors", "errors.total"},
	{KindSink, "sluice_sink_refused_total", "errors", "errors.total"},
	// Kafka store only; absent with the embedded store (then kafka is null).
	{KindSink, "sluice_sink_kafka_records_total", "sink", "sink.kafka.records"},
	{KindSink, "sluice_sink_kafka_tail_lag_records", "sink", "sink.kafka.tailLagRecords"},

	{KindXfer, "sluice_xfer_received_bytes_total", "throughput", "throughput.rawBytes, throughput.wireBytes"},
	{KindXfer, "sluice_xfer_uploads_completed_total", "xfer", "xfer.completed"},
	{KindXfer, "sluice_xfer_uploads_failed_total", "errors", "errors.total"},
	{KindXfer, "sluice_xfer_chunks_rejected_total", "errors", "errors.total"},
	{KindXfer, "sluice_xfer_expired_total", "xfer", "xfer.expired"},
}

// optional metrics exist only in some configurations, or (vectors with no
// series made in advance) only once something happened.
var optional = map[string]bool{
	"sluice_agent_rejected_messages_total": true,
	"sluice_agent_last_error":              true,
	"sluice_sink_kafka_records_total":      true,
	"sluice_sink_kafka_tail_lag_records":   true,
}

// families is one gather, by name.
type families map[string]*dto.MetricFamily

func gather(g prometheus.Gatherer) (families, error) {
	mfs, err := g.Gather()
	fs := make(families, len(mfs))
	for _, mf := range mfs {
		fs[mf.GetName()] = mf
	}
	return fs, err
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// sum is the metric summed over its label sets (0 when absent).
func (fs families) sum(name string) float64 {
	var v float64
	if mf := fs[name]; mf != nil {
		for _, m := range mf.Metric {
			v += value(m)
		}
	}
	return v
}

func (fs families) has(name string) bool { return fs[name] != nil }

// label is the metric with label l = v (0 when absent).
func (fs families) label(name, l, v string) float64 {
	if mf := fs[name]; mf != nil {
		for _, m := range mf.Metric {
			for _, lp := range m.Label {
				if lp.GetName() == l && lp.GetValue() == v {
					return value(m)
				}
			}
		}
	}
	return 0
}

// labelWhere returns the value of label l on the first series whose value
// is nonzero ("" when none): how sluice_agent_last_error names its code.
func (fs families) labelWhere(name, l string) string {
	if mf := fs[name]; mf != nil {
		for _, m := range mf.Metric {
			if value(m) == 0 {
				continue
			}
			for _, lp := range m.Label {
				if lp.GetName() == l {
					return lp.GetValue()
				}
			}
		}
	}
	return ""
}

// Sample is one metric series, as status.detail returns it.
type Sample struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Value  float64           `json:"value"`
	Help   string            `json:"help"`
}

// samples lists the series of the table's metrics of kind in section
// ("" for all sluice_* metrics), sorted by name.
func (fs families) samples(kind Kind, section string) []Sample {
	names := map[string]bool{}
	if section == "" {
		for n := range fs {
			if strings.HasPrefix(n, "sluice_") {
				names[n] = true
			}
		}
	} else {
		for _, m := range Metrics {
			if m.Kind == kind && m.Section == section {
				names[m.Name] = true
			}
		}
	}
	var out []Sample
	for n := range names {
		mf := fs[n]
		if mf == nil {
			continue
		}
		for _, m := range mf.Metric {
			s := Sample{Name: n, Value: value(m), Help: mf.GetHelp()}
			if m.Histogram != nil {
				s.Value = float64(m.Histogram.GetSampleCount())
				s.Name += "_count"
			}
			for _, lp := range m.Label {
				if s.Labels == nil {
					s.Labels = map[string]string{}
				}
				s.Labels[lp.GetName()] = lp.GetValue()
			}
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return labelKey(out[i].Labels) < labelKey(out[j].Labels)
	})
	return out
}

func labelKey(m map[string]string) string {
	ks := make([]string, 0, len(m))
	for k, v := range m {
		ks = append(ks, k+"="+v)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}
