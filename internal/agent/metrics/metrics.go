// Package metrics holds the agent's Prometheus metrics and the counters
// behind Agent.Stats, shared by ingest (what came in and was spooled) and
// the driver (what was sent and acknowledged). It depends on nothing of
// the agent's but the Sender it observes.
package metrics

import (
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/delivery"
)

// Metrics are the agent's Prometheus metrics plus the snapshot behind
// Stats (for progress lines). Everything is safe for concurrent use.
type Metrics struct {
	ingestRecords, ingestBytes        prometheus.Counter
	spooledMsgs, rawBytes, wireBytes  prometheus.Counter
	ackedMsgs, ackedRecords           prometheus.Counter
	Rejected                          *prometheus.CounterVec
	Reconnects, SpoolFull, Duplicates prometheus.Counter
	// DeadLetters counts parked messages set aside in the dead-letter
	// log (internal/agent/deadletter).
	DeadLetters       prometheus.Counter
	Fsync, ackLatency prometheus.Histogram
	// SpoolBytes reports the spool's size; set it once the spool is open.
	SpoolBytes func() int64
	// DeadLetterMessages reports the messages in the spool's dead-letter
	// log; set it once the spool is open.
	DeadLetterMessages func() int
	// Now is the agent's clock (nanoseconds, the one spool.Spooled.At
	// uses), for the age of the oldest unacknowledged message.
	Now func() int64
	// oldestAt is when the oldest unacknowledged message was spooled
	// (Now's clock), valid while hasOldest; under mu.
	oldestAt                             int64
	hasOldest                            bool
	mu                                   sync.Mutex
	st                                   Stats
	lat                                  *hdrhistogram.Histogram // µs, spool → ack
	inflightMsgs, inflightBytes, winMsgs prometheus.Gauge
	parked                               prometheus.Gauge
	winBytes, srtt                       prometheus.Gauge
	// sent, resent and timeouts follow the Sender's cumulative Stats;
	// prev is what they were last advanced to.
	sent, resent, timeouts prometheus.Counter
	prev                   delivery.Stats
	ConnectFailures        prometheus.Counter
	sinkUp                 prometheus.Gauge
	// SealKafkaRecords is 1 while new messages are sealed as Kafka
	// records sections (the sink asked, and the agent can), else 0.
	SealKafkaRecords prometheus.Gauge
	lastError        *prometheus.GaugeVec
	// lastCode is the code of lastError's one series ("" when none);
	// errMu orders the changes of lastError.
	errMu    sync.Mutex
	lastCode string
}

// Stats is a snapshot of the agent's counters.
type Stats struct {
	IngestedRecords, IngestedBytes uint64
	SpooledMessages                uint64
	RawBytes, WireBytes            uint64 // message bodies before and after compression
	AckedMessages, AckedRecords    uint64
	AckedRawBytes, AckedWireBytes  uint64
	Sent, Resent, Timeouts         uint64
	InFlightMsgs                   int
	InFlightBytes                  int64
	WindowMsgs                     int
	WindowBytes                    int64
	Unacked                        int
	Parked                         int // refused for good on this session (Sender.Parked)
	SRTT, RTO                      time.Duration
	SpoolBytes                     int64
	State                          string
	// OldestUnacked is the age of the oldest message spooled and not yet
	// acknowledged (0: none). A message spooled before the agent started
	// counts from the start.
	OldestUnacked time.Duration
	// LastError is the newest sink connection failure ("CODE: message"),
	// kept after the agent reconnected; LastErrorAt when it happened.
	LastError   string
	LastErrorAt time.Time
	// Ack latency: from the message being spooled to its ack.
	LatencyP50, LatencyP99, LatencyMax time.Duration
}

// New makes the metrics and registers them with reg when it is not nil.
func New(reg prometheus.Registerer) *Metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "agent", Name: name, Help: help})
	}
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "agent", Name: name, Help: help})
	}
	m := &Metrics{
		ingestRecords: c("ingested_records_total", "Records accepted by ingest (durably spooled)."),
		ingestBytes:   c("ingested_bytes_total", "Record bytes accepted by ingest."),
		spooledMsgs:   c("spooled_messages_total", "Messages written to the spool."),
		rawBytes:      c("message_bytes_uncompressed_total", "Message body bytes before compression."),
		wireBytes:     c("message_bytes_compressed_total", "Message body bytes after compression (as sent)."),
		ackedMsgs:     c("acked_messages_total", "Messages acknowledged by the sink."),
		ackedRecords:  c("acked_records_total", "Records in acknowledged messages."),
		Rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "agent",
			Name: "rejected_messages_total", Help: "Messages refused, by code: the sink's error code (ERROR_CODE_*), or local_unreadable, local_corrupt, local_unconvertible for a spooled message the agent itself could not send on the session (parked like a sink's refusal for good, tried again on the next session)."}, []string{"code"}),
		Reconnects:       c("reconnects_total", "Established sink streams that were lost (the agent then reconnects); failed connection attempts are connect_failures_total."),
		ConnectFailures:  c("connect_failures_total", "Connection attempts that did not end in an established stream (refused, no Welcome, rejected by the sink)."),
		sinkUp:           g("sink_up", "1 while a stream to a sink is established, else 0."),
		SealKafkaRecords: g("seal_kafka_records", "1 while new messages are sealed as Kafka records sections (kafka_zstd) because the sink asked for them (a Kafka store with agent-records=on) and this agent compresses with zstd without a dictionary, else 0."),
		lastError: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "agent", Name: "last_error",
			Help: "1 for the code of the newest sink connection failure while not connected (HandshakeTimeout, ProgressTimeout, VersionMismatch, BadAddress, TLS, Unimplemented or a protocol session status); no series while connected."}, []string{"code"}),
		SpoolFull:  c("spool_full_total", "Ingest calls refused because the spool quota was reached."),
		Duplicates: c("duplicate_requests_total", "Ingest retries of requests already spooled, answered without spooling again."),
		DeadLetters: c("dead_letters_total", "Messages refused for good (parked_messages) that the agent copied to the spool's dead-letter log and settled, "+
			"because the spool needed the room they held (half its quota in use, or its disk short of space): `sluice dead-letter list` prints them."),
		Fsync: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "sluice", Subsystem: "agent",
			Name: "spool_fsync_seconds", Help: "Latency of spool fdatasyncs.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		ackLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "sluice", Subsystem: "agent",
			Name: "ack_latency_seconds", Help: "Time from a message being spooled to its acknowledgement.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}),
		inflightMsgs: g("inflight_messages", "Messages sent and not yet acknowledged."),
		parked: g("parked_messages", "Messages refused for good on this session (rejected_messages_total: by the sink, or local_* by the agent) and held for the next one; "+
			"the acknowledged watermark stays below the oldest, so the spool keeps it and everything after it."),
		inflightBytes:      g("inflight_bytes", "Bytes sent and not yet acknowledged."),
		winMsgs:            g("window_messages", "Current window in messages (0: unbounded in this dimension)."),
		winBytes:           g("window_bytes", "Current window in bytes (0: unbounded in this dimension)."),
		srtt:               g("srtt_seconds", "Smoothed round-trip time from send to ack."),
		sent:               c("sent_messages_total", "Messages sent, resends included."),
		resent:             c("resent_messages_total", "Messages sent again after a timeout, rejection or reconnect."),
		timeouts:           c("resend_timeouts_total", "Resend timeouts (a message unacknowledged for an RTO)."),
		SpoolBytes:         func() int64 { return 0 },
		DeadLetterMessages: func() int { return 0 },
		Now:                func() int64 { return time.Now().UnixNano() },
		lat:                hdrhistogram.New(1, 3_600_000_000, 3),
	}
	if reg != nil {
		reg.MustRegister(m.ingestRecords, m.ingestBytes, m.spooledMsgs, m.rawBytes, m.wireBytes, m.ackedMsgs,
			m.ackedRecords, m.Rejected, m.Reconnects, m.SpoolFull, m.Duplicates, m.DeadLetters, m.Fsync, m.ackLatency, m.inflightMsgs, m.parked,
			m.inflightBytes, m.winMsgs, m.winBytes, m.srtt, m.sent, m.resent, m.timeouts,
			m.ConnectFailures, m.sinkUp, m.lastError, m.SealKafkaRecords,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "agent", Name: "spool_bytes",
				Help: "Bytes of the spool on disk."}, func() float64 { return float64(m.SpoolBytes()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "agent", Name: "dead_letter_messages",
				Help: "Messages in the spool's dead-letter log, set aside by this run or an earlier one (`sluice dead-letter list SPOOL`; `sluice dead-letter clear SPOOL` removes them)."},
				func() float64 { return float64(m.DeadLetterMessages()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "agent", Name: "oldest_unacked_seconds",
				Help: "Age of the oldest message spooled and not yet acknowledged by the sink (0: none); a message spooled before the agent started counts from the start."},
				func() float64 { m.mu.Lock(); defer m.mu.Unlock(); return m.oldestAge().Seconds() }))
	}
	return m
}

// Ingested counts records accepted by ingest.
func (m *Metrics) Ingested(records int, bytes int64) {
	m.ingestRecords.Add(float64(records))
	m.ingestBytes.Add(float64(bytes))
	m.mu.Lock()
	m.st.IngestedRecords += uint64(records)
	m.st.IngestedBytes += uint64(bytes)
	m.mu.Unlock()
}

// Spooled counts one message written to the spool: raw bytes before
// compression, payload after.
func (m *Metrics) Spooled(raw, payload int) {
	m.spooledMsgs.Inc()
	m.rawBytes.Add(float64(raw))
	m.wireBytes.Add(float64(payload))
	m.mu.Lock()
	m.st.SpooledMessages++
	m.st.RawBytes += uint64(raw)
	m.st.WireBytes += uint64(payload)
	m.mu.Unlock()
}

// Acked counts one message acknowledged by the sink, d after it was
// spooled.
func (m *Metrics) Acked(records, raw, payload int, d time.Duration) {
	m.ackedMsgs.Inc()
	m.ackedRecords.Add(float64(records))
	m.ackLatency.Observe(d.Seconds())
	m.mu.Lock()
	m.st.AckedMessages++
	m.st.AckedRecords += uint64(records)
	m.st.AckedRawBytes += uint64(raw)
	m.st.AckedWireBytes += uint64(payload)
	_ = m.lat.RecordValue(max(d.Microseconds(), 1))
	m.mu.Unlock()
}

// ObserveSender copies the Sender's state into the gauges and counters.
// oldestAt, when hasOldest, is when the oldest unacknowledged message was
// spooled (the agent's clock).
func (m *Metrics) ObserveSender(s *delivery.Sender, unacked int, oldestAt int64, hasOldest bool) {
	msgs, bytes := s.InFlight()
	wm, wb := s.Window()
	st := s.Stats()
	m.inflightMsgs.Set(float64(msgs))
	m.inflightBytes.Set(float64(bytes))
	m.parked.Set(float64(s.Parked()))
	m.winMsgs.Set(float64(wm))
	m.winBytes.Set(float64(wb))
	m.srtt.Set(s.SRTT().Seconds())
	// The Sender's counters only grow, so the deltas are never negative.
	m.sent.Add(float64(st.Sent - m.prev.Sent))
	m.resent.Add(float64(st.Resent - m.prev.Resent))
	m.timeouts.Add(float64(st.Timeouts - m.prev.Timeouts))
	m.prev = st
	m.mu.Lock()
	m.st.InFlightMsgs, m.st.InFlightBytes, m.st.WindowMsgs, m.st.WindowBytes = msgs, bytes, wm, wb
	m.st.Sent, m.st.Resent, m.st.Timeouts = st.Sent, st.Resent, st.Timeouts
	m.st.SRTT, m.st.RTO, m.st.State, m.st.Unacked = s.SRTT(), s.RTO(), s.State().String(), unacked
	m.st.Parked = s.Parked()
	m.oldestAt, m.hasOldest = oldestAt, hasOldest
	m.mu.Unlock()
}

// oldestAge is the oldest unacknowledged message's age now; under mu.
func (m *Metrics) oldestAge() time.Duration {
	if !m.hasOldest {
		return 0
	}
	return max(time.Duration(m.Now()-m.oldestAt), 0)
}

// Snapshot returns the counters; the latency quantiles (a walk of the
// histogram, tens of microseconds) only withLatency.
func (m *Metrics) Snapshot(withLatency bool) Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.st
	st.SpoolBytes = m.SpoolBytes()
	st.OldestUnacked = m.oldestAge()
	if withLatency {
		st.LatencyP50 = time.Duration(m.lat.ValueAtQuantile(50)) * time.Microsecond
		st.LatencyP99 = time.Duration(m.lat.ValueAtQuantile(99)) * time.Microsecond
		st.LatencyMax = time.Duration(m.lat.Max()) * time.Microsecond
	}
	return st
}

// SinkConnected: a session to a sink is established.
func (m *Metrics) SinkConnected() {
	m.sinkUp.Set(1)
	m.errMu.Lock()
	m.lastError.Reset()
	m.lastCode = ""
	m.errMu.Unlock()
}

// SinkFailed: not connected, the newest failure is code, err says it in
// words. The new code's series is set before the old one is deleted: a
// scrape in between sees both, never none (it did, with Reset then Set,
// while the agent retried: TestLastErrorPresentWhileRetrying).
func (m *Metrics) SinkFailed(code string, err error) {
	m.sinkUp.Set(0)
	m.errMu.Lock()
	m.lastError.WithLabelValues(code).Set(1)
	if m.lastCode != "" && m.lastCode != code {
		m.lastError.DeleteLabelValues(m.lastCode)
	}
	m.lastCode = code
	m.errMu.Unlock()
	m.mu.Lock()
	m.st.LastError, m.st.LastErrorAt = code+": "+err.Error(), time.Now()
	m.mu.Unlock()
}
