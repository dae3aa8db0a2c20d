// Package agent is sluice's edge agent: it accepts records (HTTP or Go
// API), packs them into messages, compresses each message once, writes it to
// a durable local spool before answering, and streams the spool to a sink
// over one gRPC stream, driving the pure delivery.Sender state machine: a
// window of in-flight messages identified by their spool offsets, batched
// acknowledgements, timeouts and resends, credits from the sink, and
// reconnection with back-off. Acknowledged spool segments are deleted.
//
// Goroutines: the batcher packs records into messages; the spool writer
// appends sealed messages (one fdatasync per group); the loop owns the
// Sender, the timers and the spool reader; per connection, one goroutine
// receives from the stream and one writes to it (gRPC allows one of each).
package agent
