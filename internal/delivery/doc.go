// Package delivery holds the pure state machines of sluice's reliable
// asynchronous delivery: the agent-side Sender and the sink-side Receiver.
// They perform no I/O, read no clock and start no goroutines; drivers feed
// them events and carry out the actions they return.
//
// The design follows etcd's raft: every input, timer fires and broken
// streams included, is an event passed to Step; every output is an action
// collected until the driver takes it with Ready and acknowledges it with
// Advance. Time is an input too: each Sender event carries Now, the driver's
// monotonic clock in nanoseconds, and timer deadlines are on that clock. So
// both machines are deterministic, and sim_test.go runs them, with a
// simulated network, spool and storage, through thousands of seeded fault
// schedules.
//
// # Protocol
//
// An agent spools every message durably before sending it; the message id
// is its position in the spool: contiguous, increasing, never reused. Over
// one stream (a gRPC bidirectional stream) the agent sends messages without
// waiting, up to its window and the sink's credits. The sink puts each
// message on a bounded per-stream queue in front of its storage writer,
// which commits in groups; once a group is durable the sink acks its ids as
// ranges. The agent keeps a watermark, the lowest id not yet acked; it
// persists it, deletes spool segments below it, and after a restart
// re-sends everything from it. A message is therefore delivered at least
// once, and the storage writer, which deduplicates by id, makes it once.
//
// Credits are cumulative per stream. The Receiver grants MsgLimit and
// ByteLimit; the Sender may send while its count of sends on the stream is
// below MsgLimit and their bytes within ByteLimit. Because both sides count
// every message sent or received, resends and rejects included, remaining
// credit equals free room in the sink's queue, and a lost or reordered
// Grant is repaired by the next one. The only exception is the empty-pipe
// waiver: a message bigger than the remaining byte credit goes alone when
// nothing is in flight, and a Receiver admits any message into an empty
// queue, so that no message size can deadlock the stream.
//
// # Driving a Sender
//
// One goroutine owns the Sender. On start, NewSender with the persisted
// watermark, Step Spooled for every spooled id at or above it, in order,
// and dial. Then, for every event:
//
//  1. Step the event: Spooled when a message is durably spooled; Connected
//     with the Welcome's credits once the handshake is done; Acked, Credits
//     and Rejected (with Reason.Retryable) for the sink's Ack, Grant and
//     Reject; Tick when the driver's timer fires; Disconnected, with a
//     uniform random jitter in [0, 1), when the stream breaks or a dial
//     fails. Discard anything still arriving from a stream once its
//     Disconnected has been stepped.
//  2. Carry out Ready() in order. Send: read the body from the spool and
//     write it to the stream (writes must keep the order of the Sends).
//     MarkAcked: persist the watermark, then delete spool segments below
//     it. Reconnect: close the stream if it is still open. Dial: dial.
//     Stalled: close the stream and step Disconnected. ArmTimer,
//     CancelTimer and CancelAllTimers need nothing.
//  3. Advance(), then set the driver's one timer to NextDeadline().
//
// The Sender keeps every deadline itself (resend timers, the reconnect
// back-off, the progress deadline), so a driver owns no protocol timing:
// it only wakes the Sender with Tick. A Tick early or late is harmless:
// early does nothing, late fires everything due. A driver may instead keep
// its own timers from ArmTimer and Reconnect{After} and step Timeout (the
// Tick-free protocol, which the Sender still accepts).
//
// Step returns an error only for an event that cannot be right (an id out
// of order, a timer never armed, a second Connected, an unknown kind); it
// then changes nothing.
//
// # Driving a Receiver
//
// One Receiver per stream, owned by the stream's goroutine. Step Hello with
// the version from the stream's first message, Received for every message,
// Stored when the storage writer reports ids durable (duplicates included),
// and Close when the stream ends. Carry out Ready() in order: Welcome, Ack,
// Grant and Reject go to the agent; Enqueue hands the message to the
// storage writer; Fail sends the reason and closes the stream. Then
// Advance().
//
// # Sender state table
//
// Rows are events, columns states; each cell is "actions → new state".
// Send* sends, with its ArmTimer, every queued message that fits, lowest id
// first (so resends go before new messages); settle removes the acked ids
// whatever their state (CancelTimer for those in flight) and emits
// MarkAcked if the watermark moved; requeue puts an in-flight message back
// in the queue; park keeps a message the sink will never take off this
// stream until the next Connected. TABLES.md has the long form; the rows of
// TestSenderStateTable are the cells.
//
//	| event \ state      | Disconnected     | Idle             | CanSend                          | Blocked                       |
//	|--------------------|------------------|------------------|----------------------------------|-------------------------------|
//	| Spooled            | queue → Disc     | Send* → CanS|Blk | Send* → CanS|Blk                 | queue → Blk                   |
//	| Acked              | settle → Disc    | settle → Idle    | settle → CanS|Idle               | settle, Send* → CanS|Blk|Idle |
//	| Timeout (live)     | impossible       | impossible       | requeue, RTO×2, Send* → CanS|Blk | requeue, RTO×2, Send* → Blk   |
//	| Timeout (stale)    | ignored          | ignored          | ignored                          | ignored                       |
//	| Tick (early)       | ignored          | ignored          | ignored                          | ignored                       |
//	| Tick (past a       | Dial (once)      | ignored          | each expired timer as Timeout    | as in CanSend → Blk|CanS      |
//	|   deadline)        |   → Disc         |                  |   (live); Stalled once → CanS|Blk|                               |
//	| Credits            | ignored (stale)  | raise → Idle     | raise → CanS                     | raise, Send* → CanS|Blk       |
//	| Connected          | unpark, Send* →  | error            | error                            | error                         |
//	|                    |   Idle|CanS|Blk  |                  |                                  |                               |
//	| Disconnected       | Reconnect → Disc | Reconnect → Disc | requeue all, CancelAllTimers,    | requeue all, CancelAllTimers, |
//	|                    |                  |                  |   Reconnect → Disc               |   Reconnect → Disc            |
//	| Rejected retryable | ignored (stale)  | ignored (stale)  | CancelTimer, requeue, Send*      | CancelTimer, requeue, Send*   |
//	|                    |                  |                  |   → CanS|Blk                     |   → Blk                       |
//	| Rejected final     | ignored (stale)  | ignored (stale)  | CancelTimer, park → CanS|Idle    | CancelTimer, park, Send*      |
//	|                    |                  |                  |                                  |   → CanS|Blk                  |
//
// # Receiver state table
//
// Grant is emitted, at most once per event, when the credit invariant (see
// Receiver) raised a limit; over credit means the queue is full by count,
// or not empty and short of bytes for the message. Discarded is a message
// the driver refused itself (its body does not decode, say): it counts as
// received, so its credit goes back, but it is never queued. The rows of
// TestReceiverStateTable are the cells.
//
//	| event \ state        | Handshaking             | Receiving                 | Blocked                   | Closed  |
//	|----------------------|-------------------------|---------------------------|---------------------------|---------|
//	| Hello (supported)    | Welcome → Recv          | Fail(DuplicateHello) → Cl | Fail(DuplicateHello) → Cl | ignored |
//	| Hello (unsupported)  | Fail(Unsupported) → Cl  | Fail(DuplicateHello) → Cl | Fail(DuplicateHello) → Cl | ignored |
//	| Received (fits)      | Fail(NoHello) → Cl      | Enqueue → Recv|Blk        | Enqueue (0 bytes) → Blk   | ignored |
//	| Received (queued id) | Fail(NoHello) → Cl      | Grant → Recv              | Grant → Blk               | ignored |
//	| Received (oversize)  | Fail(NoHello) → Cl      | Reject(Oversize), Grant   | Reject(Oversize), Grant   | ignored |
//	|                      |                         |   → Recv                  |   → Blk                   |         |
//	| Received (over       | Fail(NoHello) → Cl      | Reject(OverCredit), Grant | Reject(OverCredit), Grant | ignored |
//	|   credit)            |                         |   → Recv                  |   → Blk                   |         |
//	| Discarded            | Fail(NoHello) → Cl      | Grant → Recv              | Grant → Blk               | ignored |
//	| Stored               | error                   | Ack, Grant → Recv         | Ack, Grant → Recv|Blk     | ignored |
//	| Close                | → Cl                    | → Cl                      | → Cl                      | ignored |
package delivery
