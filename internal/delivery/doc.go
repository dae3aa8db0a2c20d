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
// # State tables
//
// The state × event tables of both machines are in docs/protocol.md,
// section 5, generated from the transcripts in testdata/sender and
// testdata/receiver (TestDocTables keeps them in step). The transcripts
// are the cell-by-cell spec: each step prints the cell it exercised
// ("Blocked × Timeout, live → Blocked"), its actions and the state after,
// and a cell without a transcript case fails TestSenderStateTable or
// TestReceiverStateTable.
package delivery
