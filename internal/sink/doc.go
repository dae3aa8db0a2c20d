// Package sink is sluice's receiving end: the gRPC server of the Sink
// service (api/sluice/v1). Agents deliver batches over Sink.Send; the sink
// validates them, stores each durably as one record of its store (a seglog
// opened with SyncAlways) and only then acknowledges it. Consumers read the
// store back over Sink.Read.
//
// # Send streams
//
// Each stream has a delivery.Receiver (the pure state machine of the
// protocol) and three goroutines: one receives and validates Requests, one
// — the handler's — drives the Receiver and hands messages to the storage
// writer, one is the only caller of stream.Send. Behaviour, in protocol
// order:
//
//   - The first Request must be a Hello with Request.version 1, a non-empty
//     agent_id of at most 255 bytes and protocol_version >= 1; anything else
//     ends the stream with InvalidArgument. With tokens configured the
//     token must belong to that agent_id (PermissionDenied otherwise; a
//     missing or unknown token is Unauthenticated before the handler runs).
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
//     body, and its record count equal to Request.record_count. The sink
//     decompresses every compressed batch to check this; it costs CPU, but
//     it is the only way to never store what readers cannot decode. A
//     failure is answered with ServiceMessage{error{message_id, code,
//     detail, retryable}} (BAD_PAYLOAD or OVERSIZE, not retryable;
//     UNKNOWN_DICTIONARY, retryable after an upload), plus the credits the
//     message used, handed back in the same ServiceMessage; it is logged
//     with agent_id and message_id and counted by reason. The stream goes
//     on.
//   - A valid batch is stepped Received. If the queue is full (the agent
//     sent beyond its credits) it is rejected with OVER_CREDIT, retryable.
//     Otherwise it goes to the storage writer; a copy of a message still
//     queued on the stream is dropped and acked with the original.
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
// Config.WriteBatchBytes), drops duplicates, encodes the rest as
// internal/storedmsg records (the body as received: compressed messages
// stay compressed) and appends them with one seglog.Append — one write and
// one fdatasync for the whole group. Only then does it report the ids to
// their streams, which ack them: an ack never precedes durability.
//
// Duplicates are keyed by (agent_id, message_id). Agents number messages
// contiguously, so per agent the index keeps a watermark (every id below
// is stored) and the stored ids above it as runs of consecutive ids: a few
// words per agent in the steady state. A duplicate is reported as stored,
// so it is acked, and is not stored again.
//
// The index is rebuilt at startup from a checkpoint, DATA/dedup.checkpoint
// (a seglog metadata file: the store offset it covers and every agent's
// watermark and runs), and a scan of the store records after that offset,
// reading their storedmsg headers. The writer checkpoints when
// Config.CheckpointInterval (30s) has passed or Config.CheckpointBytes
// (256 MiB) were stored since the last checkpoint, and at Close, so a
// restart after a crash scans at most about that much. A missing, damaged
// or inconsistent checkpoint only costs a full scan.
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
// fileName). With tokens configured, Read needs a consumer ("*") token.
package sink
