// Package client is sluice's Go API: produce records into a sink and read
// them back.
//
// A Producer embeds sluice's agent: Produce writes the records to a local
// spool (SpoolDir) and returns once they are fsynced; the Producer then
// packs them into compressed messages and delivers them to the sink in
// the background, with a window of messages in flight, resends after
// timeouts and reconnects, and failover across SinkAddrs. An
// HTTPProducer instead hands records to a running agent over its ingest
// API (what `sluice produce` does). A Consumer reads the sink's store in
// order.
//
// # Guarantees
//
//   - Durable before return: when Produce (or an HTTPProducer's Produce)
//     returns nil, the records are fsynced in a spool and survive a crash
//     of the process or the machine; they stay there until the sink has
//     stored them durably and acknowledged them. Flush waits for that.
//   - Exactly once into the sink with idempotent producer ids: every
//     spooled record is stored once (the sink deduplicates resends by
//     agent id and message id, also across its restarts). A Produce call
//     that failed may have spooled part of its records, so retrying it
//     may duplicate them; ProduceIdempotent with a producer id and a
//     growing sequence number makes the retry exact, also across crashes
//     of the producing process.
//   - At-least-once reads with groups: a Consumer with a Group starts at
//     the group's committed offset, and Commit stores the position after
//     the last message returned whole. Records returned after the last
//     commit are returned again after a restart.
//   - Exactly-once reads with your own offsets: store each Record's
//     Offset and Index with your results, in the same transaction, and
//     restart with ResumeAfter(record): the Consumer starts right after
//     it.
//
// A following Consumer outlives sink restarts: it reconnects with a
// jittered back-off and resumes after the last record it received, so it
// returns nothing twice and skips nothing. (A Kafka-backed sink with several
// partitions is the exception: one offset cannot say where each partition
// stopped, so a following Consumer there needs a Group and resumes at its
// commits, at least once.)
//
// Protocol details (messages, windows, offsets): docs/protocol.md in the
// repository.
package client
