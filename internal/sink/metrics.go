package sink

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Rejection reasons, the values of the reason label of
// sluice_sink_rejected_total.
const (
	reasonVersion     = "version"
	reasonNoPayload   = "no_payload"
	reasonOversize    = "oversize"
	reasonCorrupt     = "corrupt"
	reasonBatch       = "malformed_batch"
	reasonCount       = "record_count"
	reasonUnknownDict = "unknown_dictionary"
	reasonOverCredit  = "over_credit"
	reasonEmpty       = "empty_batch"
	// reasonKafkaRecords: a kafka_zstd message whose records section is
	// not the one its agent must send (another key or message id in a
	// record, a wrong count or offset, bytes left over).
	reasonKafkaRecords = "malformed_kafka_records"
)

// metrics are the sink's Prometheus metrics, all named sluice_sink_*.
type metrics struct {
	streams       *prometheus.GaugeVec // kind: send, read
	queuedMsgs    prometheus.Gauge
	queuedBytes   prometheus.Gauge
	receivedMsgs  prometheus.Counter
	receivedBytes prometheus.Counter
	decodedBytes  prometheus.Counter
	storedMsgs    prometheus.Counter
	storedRecords prometheus.Counter
	storedBytes   prometheus.Counter
	duplicates    prometheus.Counter
	rejected      *prometheus.CounterVec // reason
	acks          prometheus.Counter
	ackedMsgs     prometheus.Counter
	fsync         prometheus.Histogram
	commitMsgs    prometheus.Histogram
	storeErrors   prometheus.Counter
	dictUploads   prometheus.Counter
	readMsgs      prometheus.Counter
	readRecords   prometheus.Counter
	corrupt       prometheus.Counter
	checkpoints   prometheus.Counter

	storeAvailable prometheus.Gauge
	storeOutages   prometheus.Counter

	// Abuse bounds (Config.MaxConnsPerPeer, MaxConsumers, HelloTimeout,
	// credits).
	consumers        prometheus.Gauge
	consumerBuffered prometheus.Gauge
	refused          *prometheus.CounterVec // reason
	streamsCut       *prometheus.CounterVec // reason
	stalledConns     prometheus.Counter
	connStreamCap    prometheus.Counter

	// Kafka store only: registered only when the store is Kafka.
	kafkaProduce     prometheus.Histogram
	kafkaRecords     prometheus.Counter
	kafkaTailRecords prometheus.Counter
	kafkaForeign     prometheus.Counter
	kafkaTailSkipped prometheus.Counter
	kafkaLag         prometheus.Gauge
	kafkaCatchUp     prometheus.Histogram
}

// Reasons of sluice_sink_refused_total: a connection or stream refused
// because a bound was reached, or a session whose ids another spool took.
const (
	refusedConnsPerPeer = "conns_per_peer"
	refusedConsumers    = "max_consumers"
	// refusedConsumersPerPeer: Config.MaxConsumersPerPeer.
	refusedConsumersPerPeer = "consumers_per_peer"
	refusedConns            = "max_conns"
	// refusedWaitingStreams: a Send stream refused because its connection
	// had internal/firstmsg.DefaultMax Send streams waiting for a Hello.
	refusedWaitingStreams = "waiting_streams"
	// refusedIDsTaken: a Send session whose agent's spool never sent an
	// id the sink holds under its agent id (checkSentBelow).
	refusedIDsTaken = "ids_taken"
)

// Reasons of sluice_sink_streams_cut_total: a stream the sink ended because
// its client misbehaved.
const (
	cutHelloTimeout = "hello_timeout"
	cutOutOfWindow  = "out_of_window"
	// cutReplaced: a Send session ended because a newer session of the
	// same agent id replaced it (not misbehaviour by itself; repeated, two
	// agents share one id).
	cutReplaced = "replaced"
)

// newMetrics creates the sink's metrics and registers them in reg; the
// Kafka store's only when kafka is set, so that an embedded sink does not
// export metrics that never move.
func newMetrics(reg prometheus.Registerer, kafka bool) *metrics {
	const ns, sub = "sluice", "sink"
	f := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: ns, Subsystem: sub, Name: name, Help: help}
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts(f(name, help)))
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts(f(name, help)))
	}
	m := &metrics{
		streams:       prometheus.NewGaugeVec(prometheus.GaugeOpts(f("streams", "Open streams, by kind (send: agents, read: consumers).")), []string{"kind"}),
		queuedMsgs:    gauge("queued_messages", "Messages handed to the storage writer and not yet stored, over all streams."),
		queuedBytes:   gauge("queued_bytes", "Payload bytes of the queued messages."),
		receivedMsgs:  counter("received_messages_total", "Batch messages received from agents, valid or not."),
		receivedBytes: counter("received_bytes_total", "Payload bytes received from agents, as sent (compressed)."),
		decodedBytes:  counter("received_decoded_bytes_total", "Uncompressed batch bytes of the valid messages received."),
		storedMsgs:    counter("stored_messages_total", "Messages appended to the store."),
		storedRecords: counter("stored_records_total", "Records in the messages appended to the store."),
		storedBytes:   counter("stored_bytes_total", "Bytes of the store records appended (headers and bodies as received)."),
		duplicates:    counter("duplicate_messages_total", "Messages received again after being stored, acked without storing."),
		rejected:      prometheus.NewCounterVec(prometheus.CounterOpts(f("rejected_total", "Messages rejected, by reason.")), []string{"reason"}),
		acks:          counter("acks_sent_total", "Ack responses sent."),
		ackedMsgs:     counter("acked_messages_total", "Message ids acknowledged."),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "fsync_seconds",
			Help: "Duration of the store's fdatasync calls.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		commitMsgs: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "commit_messages",
			Help: "Messages per group commit.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		storeErrors: counter("store_errors_total", "Group commits that failed."),
		dictUploads: counter("dictionary_uploads_total", "Dictionaries uploaded and stored."),
		readMsgs:    counter("read_messages_total", "Stored messages sent to consumers."),
		readRecords: counter("read_records_total", "Records in the stored messages sent to consumers."),
		corrupt:     counter("corrupt_records_total", "Store records that could not be decoded (skipped)."),
		checkpoints: counter("checkpoints_total", "Dedup checkpoints written."),

		storeAvailable: gauge("store_available", "1 while the store takes writes, 0 while it does not (Kafka unreachable or not acknowledging): credits are withheld."),
		storeOutages:   counter("store_outages_total", "Times the store became unavailable."),
		consumers:      gauge("consumers", "Read streams being served (at most Config.MaxConsumers)."),
		consumerBuffered: gauge("consumer_buffered_bytes",
			"Bytes held for Read streams: store chunks read and records decompressed, not yet sent."),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts(f("refused_total",
			"Connections and streams refused because a bound was reached, by reason.")), []string{"reason"}),
		streamsCut: prometheus.NewCounterVec(prometheus.CounterOpts(f("streams_cut_total",
			"Streams the sink ended because the client misbehaved, by reason.")), []string{"reason"}),
		stalledConns: counter("stalled_conns_total",
			"Connections closed because a stream began a message and stopped sending it for the stall timeout."),
		connStreamCap: counter("conn_stream_cap_total",
			"Times a connection reached Config.MaxStreamsPerConn open streams (its client queues further ones)."),
		kafkaProduce: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "kafka_commit_seconds",
			Help: "Kafka store: time from the start of a group commit to Kafka's last ack of it.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}),
		kafkaRecords:     counter("kafka_records_total", "Kafka store: records produced (one per record of each message)."),
		kafkaTailRecords: counter("kafka_tail_records_total", "Kafka store: records the dedup tailer read from the topic (any sink's)."),
		kafkaForeign:     counter("kafka_foreign_records_total", "Kafka store: records in the topic without valid sluice headers (ignored by dedup)."),
		kafkaTailSkipped: counter("kafka_tail_own_records_skipped_total", "Kafka store: records of this sink's own batches the dedup tailer skipped undecoded (the writer indexed their messages)."),
		kafkaLag:         gauge("kafka_tail_lag_records", "Kafka store: records in the topic the dedup tailer has not read yet."),
		kafkaCatchUp: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "kafka_catchup_seconds",
			Help: "Kafka store: time from an agent's Hello until the dedup tailer had read the topic up to its end as of then.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
	}
	for _, r := range []string{reasonVersion, reasonNoPayload, reasonOversize, reasonCorrupt, reasonBatch, reasonCount, reasonUnknownDict, reasonOverCredit, reasonEmpty, reasonKafkaRecords} {
		m.rejected.WithLabelValues(r)
	}
	m.streams.WithLabelValues("send")
	m.streams.WithLabelValues("read")
	for _, r := range []string{refusedConnsPerPeer, refusedConsumers, refusedConsumersPerPeer, refusedConns, refusedWaitingStreams, refusedIDsTaken} {
		m.refused.WithLabelValues(r)
	}
	for _, r := range []string{cutHelloTimeout, cutOutOfWindow, cutReplaced} {
		m.streamsCut.WithLabelValues(r)
	}
	reg.MustRegister(m.streams, m.queuedMsgs, m.queuedBytes, m.receivedMsgs, m.receivedBytes, m.decodedBytes,
		m.storedMsgs, m.storedRecords, m.storedBytes, m.duplicates, m.rejected, m.acks, m.ackedMsgs,
		m.commitMsgs, m.storeErrors, m.dictUploads, m.readMsgs, m.readRecords, m.corrupt, m.checkpoints,
		m.storeAvailable, m.storeOutages, m.consumers, m.consumerBuffered, m.refused, m.streamsCut, m.stalledConns,
		m.connStreamCap)
	if !kafka {
		reg.MustRegister(m.fsync) // the embedded store's
	}
	if kafka {
		reg.MustRegister(m.kafkaProduce, m.kafkaRecords, m.kafkaTailRecords, m.kafkaForeign, m.kafkaTailSkipped, m.kafkaLag, m.kafkaCatchUp)
	}
	return m
}
