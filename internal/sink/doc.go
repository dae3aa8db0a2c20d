// Package sink is sluice's receiving end: a protocol.Service (ServeSend,
// ServeRead) that agents deliver batches to and consumers read from. It
// validates every batch, stores it durably (its own seglog through
// internal/store/seglogstore, or a Kafka topic through
// internal/store/kafkastore: Config.Store), drops duplicates by (agent
// id, message id), and only then acknowledges it; consumers read the
// store back with credits, optionally as a group.
//
// The sink knows no transport: internal/transport/grpctransport/grpcserve
// serves it over gRPC, internal/transport/rsockettransport over RSocket,
// internal/transport/memconn in tests, each with what Sink.Serving gives
// it. Close ends every session (and stops the servers attached to it)
// before it stores what is queued.
//
// The protocol is docs/protocol.md; what the sink does with each stream,
// its store, dedup, limits and metrics is docs/architecture.md, "The sink
// in detail".
package sink
