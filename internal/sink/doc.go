// Package sink is sluice's receiving end: a protocol.Service (ServeSend,
// ServeRead) that agents deliver batches to and consumers read from. It
// knows no transport: internal/transport/grpctransport/grpcserve serves it
// over gRPC (the Sink service of api/sluice/v1, whose protobuf types only
// internal/transport/grpctransport knows), rsockettransport over RSocket,
// each given what it needs by Sink.Serving. The sink validates batches, stores them
// durably and only then acknowledges them. The store (Config.Store) is
// either the sink's own (internal/store/seglogstore: a seglog in
// DATA/store opened with SyncAlways, one record per message, the payload
// as the agent sent it) or a Kafka topic (one Kafka record per record of
// each message; see "Kafka store" below). Both sit behind the same storage
// writer, dedup and acks, and report to a session only through its
// store.Acks.
//
// Requests and Responses below are the gRPC transport's names for the
// protocol's frames (Hello, Message, Dictionary; Welcome, Ack, Credit,
// Error): see internal/protocol and docs/protocol.md.
//
// # Send streams
//
// Each session has a delivery.Receiver (the pure state machine of the
// protocol) and three goroutines: one receives and validates frames and
// steps the Receiver with them, handing messages straight to the storage
// writer (validate.go, flow.go); one — ServeSend's — steps the rest
// (stored ids, store status, shutdown) and ends the session (session.go);
// one is the only caller of Conn.Send. The first two share a lock.
// Behaviour, in protocol order:
//
//   - The first Request must be a Hello with Request.version 1, a non-empty
//     agent_id of at most 255 bytes and protocol_version >= 1; anything else
//     ends the stream with InvalidArgument. It must come within
//     Config.HelloTimeout (10s; DeadlineExceeded otherwise). With tokens
//     configured the token must belong to that agent_id; with mutual TLS
//     the client certificate must name it (auth.CertIdentity: URI SAN
//     spiffe://TRUST-DOMAIN/agent/ID, else the Common Name); with both,
//     both. Otherwise the stream ends with PermissionDenied and a Warn log
//     (a missing or unknown token is Unauthenticated before the handler
//     runs). Without this binding any certificate could send as another
//     agent, and the dedup index would then drop that agent's later
//     messages as duplicates.
//   - The answer is a Welcome: cumulative credits equal to the per-stream
//     queue (Config.QueueMessages, Config.QueueBytes), max_message_bytes
//     (Config.MaxMessageBytes), the subset of Hello.dictionary_ids the sink
//     holds for this agent, protocol_version min(Hello's, 1), and a random
//     session_id logged on both sides.
//   - Batches (plain, zstd, zstd_dict) are validated, in order of arrival,
//     before the Receiver sees them: Request.version 1, a payload present,
//     its size as sent at most max_message_bytes, the zstd frame decoding
//     (with the agent's dictionary for zstd_dict) to at most
//     max_message_bytes, the result being a well-formed internal/batch
//     body holding at least one record, and its record count equal to
//     Request.record_count. The sink
//     decompresses every compressed batch to check this; it costs CPU, but
//     it is the only way to never store what readers cannot decode. A
//     failure is answered with ServiceMessage{error{message_id, code,
//     detail, retryable}} (BAD_PAYLOAD or OVERSIZE, not retryable;
//     UNKNOWN_DICTIONARY, retryable after an upload), plus the credits the
//     message used, handed back in the same ServiceMessage; it is logged
//     with agent_id and message_id and counted by reason. The stream goes
//     on.
//   - A valid batch is stepped Received. If the queue's bytes are full it
//     is rejected with OVER_CREDIT, retryable: a well-behaved agent does
//     that only under the empty-pipe waiver (delivery.Sender.fits).
//     Otherwise it goes to the storage writer; a copy of a message still
//     queued on the stream is dropped and acked with the original.
//   - An agent that ignores its credits is cut off instead of being
//     received, decompressed and rejected at wire speed: a batch arriving
//     with no message credit left, or more than max(QueueBytes,
//     MaxMessageBytes) of batches beyond the byte credit since the last
//     one queued, gets ServiceMessage{error{OUT_OF_WINDOW, retryable}} and
//     the stream ends with ResourceExhausted (session.checkWindow, flow.go, says
//     why no well-behaved agent gets there).
//   - Acks are Response{ack{ranges}} sent once the messages are durable,
//     duplicates included; new cumulative credits follow in a
//     ServiceMessage whenever the queue frees up.
//   - A dictionary upload is checked (codec.ParseDictionary, the id equal
//     to the header's, not 0), stored durably in
//     DATA/dicts/AGENT/ID.zdict, and announced with
//     ServiceMessage{dictionary_ids: [id]}. A batch sent after the upload on
//     the same stream may use it at once: Requests are handled in order. A
//     bad upload, or different bytes under an id already used, ends the
//     stream with InvalidArgument, since every message using that
//     dictionary would fail.
//   - A second Hello ends the stream with InvalidArgument.
//   - While the store is unavailable (only the Kafka store reports that:
//     see below) every connected agent gets ServiceMessage{store_status{
//     available: false, detail}} — an agent connecting meanwhile gets it
//     right after its Welcome — and available: true when it recovers. The
//     messages already queued wait; no credit is granted, since credit
//     follows stores; nothing is failed.
//   - When the agent closes its side, the sink acks what is queued and ends
//     the stream with OK. When the sink shuts down, it takes nothing more,
//     acks what is queued (within Config.ShutdownTimeout) and ends the
//     stream with Unavailable. If the store fails, the streams whose
//     messages were in the failed commit end with Unavailable; their
//     agents resend on a new stream.
//
// # Storage writer and dedup
//
// One goroutine writes the store for all streams: it takes every message
// available (a blocking receive, then a non-blocking drain, up to
// Config.WriteBatchBytes), drops duplicates and hands the rest to the
// store in one call. The embedded store encodes them as internal/storedmsg
// records (the body as received: compressed messages stay compressed) and
// appends them with one seglog.Append — one write and one fdatasync for the
// whole group. The Kafka store produces every record of them and waits for
// Kafka's acks (below). Only then does the writer report the ids to their
// streams, which ack them: an ack never precedes durability.
//
// Duplicates are keyed by (agent_id, message_id). Agents number messages
// contiguously, so per agent the index keeps a watermark (every id below
// is stored) and the stored ids above it as runs of consecutive ids: a few
// words per agent in the steady state. A duplicate is reported as stored,
// so it is acked, and is not stored again.
//
// With the embedded store the index is rebuilt at startup from a
// checkpoint, DATA/dedup.checkpoint (a seglog metadata file: the store
// offset it covers and every agent's watermark and runs), and a scan of the
// store records after that offset, reading their storedmsg headers. The
// writer checkpoints when Config.CheckpointInterval (30s) has passed or
// Config.CheckpointBytes (256 MiB) were stored since the last checkpoint,
// and at Close, so a restart after a crash scans at most about that much.
// A missing, damaged or inconsistent checkpoint only costs a full scan.
// (The Kafka store's index is rebuilt from the topic: below.)
//
// # Read streams
//
// The first ReadRequest must be a ReadStart. The read begins at
// from_offset, or at the group's committed offset when from_committed is
// set and the group has one; an offset outside [first, next] of the store
// is OutOfRange. The sink sends one StoredMessage per store record — the
// records decompressed (with the agent's dictionary) and unpacked — only
// while the consumer has credit: each request_n adds to it and each
// StoredMessage uses one. When the reader has caught up it sends
// EndOfLog{next_offset}: once at the start if there is nothing to read, and
// again each time it catches up after sending messages. Without follow the
// stream then ends (OK); with a group, only once the consumer has closed
// its side, so that the commits it sent are applied (or after 10s). With
// follow the sink waits for new records; a following consumer ends the
// stream by closing its side. commit(offset) stores the group's offset
// durably in DATA/groups/GROUP (needs ReadStart.group; at most the store's
// next offset). Agent and group names are escaped into file names (see
// fileName). With tokens configured, Read needs a consumer ("*") token;
// with mutual TLS, a reader certificate (URI SAN
// spiffe://TRUST-DOMAIN/reader, or Common Name "reader"); agents may not
// read. At most Config.MaxConsumers (1024) Read streams are served at once,
// and Config.MaxConsumersPerPeer (256) from one IP address, whatever its
// connections, so that one client cannot take every slot; more end with
// ResourceExhausted. A Read stream holds a store chunk only
// while it has something to send: the chunk is 64 MiB divided among the
// consumers (64 KiB to 1 MiB each), and is dropped while the consumer
// waits for credit or for new records; zstd decoders and decompression
// buffers are pooled across streams; and the gRPC server marshals into a
// buffer pool with a tier at every power of two (gRPC's default put each
// 64 KiB StoredMessage in a 1 MiB buffer). Measured with 200 followers of
// a 32 MB store, each on its own connection: an idle follower holds
// 0.09 MB of heap instead of 1.05 MB (TestFollowersHeap), and the sink
// process peaks at 268 MB RSS while they catch up instead of 855 MB
// (TestFollowersRSS).
// Reads of a Kafka store differ in the ways listed below.
//
// # Kafka store
//
// Config.Store "kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?partitions=N&
// replication=N]" stores messages in a Kafka topic. DataDir is still
// required: it holds the dictionaries and the dedup checkpoint.
//
// Startup. New connects, retrying for Config.KafkaStartTimeout (30s;
// --kafka-start-timeout): a wrong address is an error naming the brokers'
// last error, not a sink that never stores. It creates the topic if it is missing —
// partitions=N (default 1), replication=N (default min(3, brokers in the
// cluster)), min.insync.replicas 2 from replication 3 on (else 1),
// max.message.bytes = MaxMessageBytes + 64 KiB — and reads the topic's
// max.message.bytes: a batch holding a record longer than that, less 4 KiB
// of overhead, is refused with OVERSIZE (not retryable) at validation,
// since Kafka would never take it. Later outages do not fail anything.
//
// Records. The writer decompresses each message (with its agent's
// dictionary), splits it (internal/batch) and produces one Kafka record per
// record: value the record's bytes, key the agent id (so an agent's records
// stay in one partition, in the order they were stored), and headers
// sluice-agent (agent id), sluice-message (message id, decimal),
// sluice-index (the record's index in the message, from 0) and
// sluice-count (the message's record count). The producer is franz-go with
// idempotence, acks=all, unlimited retries and no delivery timeout, and
// compresses its record batches with zstd. The agents' compression cannot
// be passed through: a Kafka batch compresses Kafka's own record framing
// (lengths, offset and timestamp deltas, keys, headers), not sluice's
// batch body, and a frame compressed with an agent's dictionary would be
// unreadable to every other consumer; the sink decompresses every message
// anyway to validate it. A group commit produces every record of the
// group, flushes, and waits for every ack; only then are the messages
// stored and acked. Decoded bodies are recycled as their records are
// acknowledged, and the producer buffers at most 100,000 records or
// 64 MiB, so memory does not grow with the compression ratio.
//
// Outages. With unlimited retries an unreachable Kafka blocks the group
// commit in progress; the streams' queues fill and credit stops, so agents
// keep their messages in their spools; nothing is failed. A health monitor
// lists the topic's end offsets every second (2s timeout) and watches the
// commit in progress: a failed probe, a missing topic, or a commit
// outstanding for 2s marks the store unavailable — gauge
// sluice_sink_store_available 0, one Warn log, and a store_status
// ServiceMessage to every agent — until a probe succeeds with no commit
// stalled. At Close, what the store cannot take within ShutdownTimeout is
// abandoned (it was never acked).
//
// Dedup across restarts and sinks. A message is in the store once Kafka
// holds all its records; any number of sinks may write one topic. Each
// sink runs a tailer: a consumer reading every partition of the topic from
// the dedup checkpoint (DATA/kafka-dedup.checkpoint: topic name and id,
// the next offset per partition, the index, and the record indexes seen of
// messages seen in part) to the end, then following it. Every record with
// valid sluice headers marks its index seen; a message is stored when
// indexes 0 to sluice-count-1 have all been seen, whoever wrote them. A
// message that a crashed or failed commit wrote only in part is therefore
// not stored, and is written whole when resent. The writer also records
// what it stored itself as soon as Kafka acknowledged it. Checkpoints
// follow CheckpointInterval and CheckpointBytes (bytes written or read by
// the tailer), and Close; so a restart reads only the tail of the topic.
//
// On a Hello the sink lists the topic's end offsets (retrying while Kafka
// is away) and holds the stream's messages — Welcome and credits are sent
// at once, the messages queue — until the tailer has read every partition
// up to them. Hence the guarantee: a message id of an agent is stored once
// across restarts and across all the sinks of a topic, provided every
// record of it had been acknowledged by Kafka (to any sink) before the
// agent's Hello reached this sink. A copy can be written only when the
// agent resends a message whose write was still in progress — at another
// sink, or in a commit that failed or died with its sink — when it
// reconnected; that message had not been acknowledged, so the agent had to
// resend it. The copy has the same headers, so consumers can drop it (see
// docs/scaling.md, "Kafka store"), and Read does within a stream. Records deleted
// by retention before a sink read them cannot deduplicate anything: keep
// the topic's retention well above the longest an agent may hold an
// unacknowledged message.
//
// Read. A read position is a partition and an offset in it, packed into
// the uint64 of StoredMessage.offset, from_offset and commit as
// partition<<48 | offset; with one partition it is the Kafka offset. A
// read lists the end offsets at its start and sends every partition up to
// them (all of them, then EndOfLog, unless follow), in Kafka order within a
// partition and interleaved across partitions as fetched. Consecutive
// records of one message in one partition make one StoredMessage, whose
// offset is that of its last record; records without sluice headers are
// sent with an empty agent_id. Within one stream, a record already sent
// (same agent, message and index) is left out; a run of only such copies
// is sent as a StoredMessage without records, so that its offset can be
// committed. from_offset 0 starts every partition at its start; another
// from_offset names one partition and is refused (InvalidArgument) if the
// topic has several. EndOfLog.next_offset is the packed next offset with
// one partition, 0 with several. A group is a Kafka consumer group of that
// name: from_committed starts each partition at the group's committed
// offset (at the start without one), and commits go to Kafka, coalesced
// (the latest offset per partition once the previous commit returned), all
// of them applied before the stream ends.
//
// # Data directory, readiness and limits
//
// New takes an exclusive lock on DataDir (internal/dirlock, DATA/LOCK)
// before touching it, and Close releases it last: a second sink on the
// same directory fails at once with "data DIR is in use by another sluice
// process (pid N)", instead of both appending to one store. Tools that
// only read need no lock.
//
// Ready (served at /readyz) is nil while the sink is not shutting down
// and its store is writable: for the embedded store, unless the last group
// commit failed (a disk full, an I/O error; the next successful commit
// clears it); for Kafka, while the health monitor sees Kafka answering.
//
// Bounds on what one client can make the sink hold, beyond the per-stream
// queue (credits):
//
//   - Config.MaxStreamsPerConn (256): HTTP/2 concurrent streams per
//     connection (SETTINGS_MAX_CONCURRENT_STREAMS; RFC 9113 §5.1.2 asks
//     for no less than 100). A gRPC client queues the streams it opens
//     beyond it, silently: a connection reaching it is counted in
//     sluice_sink_conn_stream_cap_total and logged at Warn once a minute.
//     256 is MaxConsumersPerPeer, so one connection can carry every
//     consumer the sink serves one address; what they hold is bounded by
//     the shared read budget (64 MiB of read chunks over all Read
//     streams, 64 KiB each with 1024), not by this;
//   - Config.MaxConsumersPerPeer (256) and MaxConsumers (1024): Read
//     streams from one IP address, and in all (consumers.go); beyond,
//     ResourceExhausted, refused_total{reason="consumers_per_peer"} or
//     {reason="max_consumers"}, logged at Warn once a minute;
//   - Config.MaxConnsPerPeer (64): open connections per IP address that
//     have not proven an identity (no Send session past its Hello and
//     authentication); more are closed as soon as accepted (counted in
//     sluice_sink_refused_total, logged once a minute per peer). After
//     the Hello the bound is per agent identity: one live Send session
//     per agent id, a new Hello ending the older session with Aborted
//     (limits.go, Sink.addSendStream), so a fleet behind one NAT address
//     is served;
//   - Config.MaxConns (16384): open gRPC connections from all addresses
//     together, identified or not, closed at accept beyond it
//     (refused_total{reason="max_conns"}): what bounds the sink's file
//     descriptors when MaxConnsPerPeer does not (without authentication
//     agent ids are whatever clients claim, so a Hello proves little);
//   - the gRPC receive limit is the largest Request a well-behaved agent
//     sends, max(MaxMessageBytes, a dictionary upload) + 64 KiB, so half a
//     message buffers at most that; larger ones end the stream with
//     ResourceExhausted;
//   - Config.HelloTimeout (10s) ends a stream that says nothing, and Close
//     ends such streams at once instead of waiting for them;
//   - Config.StallTimeout (60s) puts a deadline on a partial message: a
//     connection with a stream holding 64 KiB or more of an incomplete
//     message, free to send (its flow-control windows open) and sending
//     less than 64 KiB more of it in that time, is closed (grpcserve's stall watch;
//     counted in sluice_sink_stalled_conns_total, logged at Warn with the
//     bytes held);
//   - keepalive: the sink pings a connection quiet for 30s and closes it
//     if the ping is not answered within 10s (half-open agents), and lets
//     clients ping every 5s or more.
//
// Without tokens or mutual TLS, anyone reaching the port may send as any
// agent and read everything: grpcserve.Serve logs a Warn saying so when it listens
// on a non-loopback address.
//
// # Metrics
//
// Every metric the sink exports (TestDocMetrics checks this list against
// the registry; "kafka" or "embedded" marks those of one store only):
//
//	sluice_sink_streams                      gauge      open streams, by kind (send, read)
//	sluice_sink_queued_messages              gauge      messages handed to the storage writer, not yet stored
//	sluice_sink_queued_bytes                 gauge      their payload bytes
//	sluice_sink_received_messages_total      counter    batches received, valid or not
//	sluice_sink_received_bytes_total         counter    their payload bytes as sent
//	sluice_sink_received_decoded_bytes_total counter    uncompressed bytes of the valid ones
//	sluice_sink_stored_messages_total        counter    messages appended to the store
//	sluice_sink_stored_records_total         counter    records in them
//	sluice_sink_stored_bytes_total           counter    bytes appended
//	sluice_sink_duplicate_messages_total     counter    messages received again after being stored
//	sluice_sink_rejected_total               counter    messages rejected, by reason
//	sluice_sink_acks_sent_total              counter    Ack responses sent
//	sluice_sink_acked_messages_total         counter    message ids acked
//	sluice_sink_commit_messages              histogram  messages per group commit
//	sluice_sink_store_errors_total           counter    group commits that failed
//	sluice_sink_dictionary_uploads_total     counter    dictionaries uploaded
//	sluice_sink_read_messages_total          counter    stored messages sent to consumers
//	sluice_sink_read_records_total           counter    records in them
//	sluice_sink_corrupt_records_total        counter    store records that cannot be decoded
//	sluice_sink_checkpoints_total            counter    dedup checkpoints written
//	sluice_sink_store_available              gauge      1 while the store takes writes
//	sluice_sink_store_outages_total          counter    times the store became unavailable
//	sluice_sink_consumers                    gauge      Read streams served
//	sluice_sink_consumer_buffered_bytes      gauge      bytes held in read chunks and decode buffers
//	sluice_sink_refused_total                counter    connections and streams refused by a bound, by reason
//	sluice_sink_streams_cut_total            counter    streams ended for misbehaviour, by reason
//	sluice_sink_stalled_conns_total          counter    connections closed: a message begun and not continued (--stall-timeout)
//	sluice_sink_conn_stream_cap_total        counter    times a connection reached --max-streams-per-conn streams
//	sluice_sink_fsync_seconds                histogram  embedded: fdatasync durations
//	sluice_sink_store_bytes                  gauge      embedded: size of the segment files
//	sluice_sink_store_next_offset            gauge      embedded: offset of the next message
//	sluice_sink_kafka_commit_seconds         histogram  kafka: group commit to Kafka's last ack
//	sluice_sink_kafka_records_total          counter    kafka: records produced
//	sluice_sink_kafka_tail_records_total     counter    kafka: records the dedup tailer read
//	sluice_sink_kafka_foreign_records_total  counter    kafka: records without sluice headers
//	sluice_sink_kafka_tail_lag_records       gauge      kafka: records the tailer has not read
//	sluice_sink_kafka_catchup_seconds        histogram  kafka: Hello until the tailer caught up
package sink
