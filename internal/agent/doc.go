// Package agent is sluice's edge agent: it accepts records (HTTP or Go
// API, and collectors' requests: Prometheus remote-write and OTLP,
// through collect), packs them into messages, compresses each message once, writes it to
// a durable local spool before answering, and streams the spool to a sink
// over one session, driving the pure delivery.Sender state machine: a
// window of in-flight messages identified by their spool offsets, batched
// acknowledgements, timeouts and resends, credits from the sink, and
// reconnection with back-off. Acknowledged spool segments are deleted.
//
// This package is the wiring (Config, New, Close, the ingest calls); the
// jobs are in subpackages, with dependencies pointing one way:
//
//	agent ──► collect (remote-write, OTLP/HTTP; otlpgrpc) ──► Agent.Ingest
//	  │
//	  ├──► ingest (HTTP, batcher, compression, spool writer)
//	  │          │
//	  ├──► driver (Sender, sessions) ──► protocol.Dialer (gRPC, memconn)
//	  │          │
//	  └──────────┴──► spool (the durable queue), metrics
//
// Goroutines: ingest calls pack their records into messages themselves
// (under the batcher's lock; a timer seals a message that lingered);
// compression workers compress them in parallel; the spool writer appends sealed
// messages in order (one fdatasync per group); the driver's loop owns the
// Sender and its one timer; per session, one goroutine receives from the
// sink and one writes messages read from the spool.
package agent
