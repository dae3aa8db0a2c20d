// Package netem emulates a wide-area link between TCP clients and a server on
// loopback: one shared bottleneck rate for all connections (like a real link,
// not a per-connection limit), a one-way delay in each direction, optional
// jitter, and connection resets. It is a TCP proxy, so it needs no privileges.
//
// # Use
//
//	l, err := netem.New(netem.Config{
//		Target: serverAddr,            // where the link leads
//		Rate:   40e6 / 8,              // 40 Mbit/s each way
//		Delay:  20 * time.Millisecond, // one way: RTT grows by 40 ms
//	})
//	addr, err := l.Listen("127.0.0.1:0") // clients dial addr instead of serverAddr
//	...
//	l.ResetAll() // a network flap: every live connection gets an RST
//	l.Close()
//
// # Model
//
// Every accepted client connection gets its own connection to Config.Target.
// Each direction of each connection is a flow: a reader goroutine reads the
// source socket in chunks and a writer goroutine writes the chunks to the
// destination socket. A chunk is at most what the link sends in 2 ms
// (Rate/500 bytes, but at least 1500 and at most 16 KiB or Burst), or
// 64 KiB when Rate is 0. In between a
// chunk passes two stages, which together are one direction of the link:
//
//   - The bottleneck (only when Rate > 0). All flows of a direction share one
//     scheduler goroutine and one token bucket of Rate bytes/s and depth
//     Burst. The two directions are independent: the link is full duplex.
//     The scheduler serves the flows that have chunks queued round-robin, one
//     chunk per turn, except that a flow which had nothing queued for a whole
//     round goes first (fq_codel's sparse-flow rule). It releases a chunk at
//     the instant the bucket holds enough tokens for it, which is the instant
//     its last byte would have been serialized onto the wire. Release
//     instants follow from the chunks' arrival times and the bucket alone,
//     not from when the scheduler goroutine happens to run, so a late wake-up
//     costs neither rate nor latency accuracy.
//
//   - The delay line. A released chunk (or, without a rate limit, a chunk
//     just read) is due at its release time + Delay + a uniform jitter in
//     [-Jitter, +Jitter]. Each flow keeps its chunks in a FIFO ordered by due
//     time; its writer sleeps until the head is due and then writes every chunk
//     that is due, with one writev.
//
// A chunk queued at the bottleneck counts against QueueBytes. When the queue
// is full a reader stops reading, so the sender's socket buffers fill and its
// writes block: a full bottleneck pushes back on TCP, the way a real one
// does, except that nothing is dropped.
//
// End of stream travels the link like data: a FIN read from one side is
// passed on (as a half-close, CloseWrite) after the data before it, Delay
// later. An error reading one side (it was reset) is passed on as a reset of
// both sides, also after the data before it. An error writing one side resets
// both sides at once. When both directions have ended, both sockets are
// closed.
//
// # Trade-offs
//
// Split TCP. The proxy terminates TCP on both sides, each over loopback. The
// endpoints' TCP stacks see a near-zero RTT, so what depends on TCP's view of
// the path is not emulated: there is no slow start over the emulated RTT, a
// single connection fills the bottleneck at once, throughput is not limited
// by window/RTT, and connection setup is free (connect returns at once and
// the server sees the connection immediately, one RTT earlier than over a
// real WAN; the first bytes still take Delay). What is emulated is what an
// application sees end to end: a request's bytes take Delay (plus
// serialization and queueing) to reach the server and the response takes
// Delay to come back, and all connections share Rate.
//
// Fair queuing, not drop-tail. The bottleneck serves connections round-robin
// by chunk, a connection that was idle goes first, and a connection may
// always queue one chunk even when the queue is full. So a small request
// waits only for the chunk being sent (about 2 ms), like behind an
// fq_codel router, and not behind the whole queue as at a FIFO router with a
// deep buffer: bufferbloat is not emulated. Fairness is per chunk, not per
// byte: a connection that writes in small pieces gets proportionally less.
// The bottleneck holds at most QueueBytes plus one chunk per connection.
// There is no packet loss; a full queue blocks the senders instead.
//
// In-flight cap. Besides the bottleneck, a flow may hold a bounded number of
// bytes read but not yet written to its destination (chunks on the wire, and
// data the destination is not reading). With a rate limit the cap is twice
// (QueueBytes + Burst + Rate×(Delay+Jitter)) plus four chunks, so it never
// binds while the destination keeps reading. Without one it is the larger of
// 4 MiB and 250 MB/s × (Delay+Jitter), plus four chunks, which limits one
// connection to about 2 Gbit/s when there is a delay. The cap stands in for
// the receive window that split TCP hides.
//
// Jitter never reorders: a TCP stream must stay in order, so a chunk's due
// time is clamped to be no earlier than that of the chunk before it in the
// same flow, and no earlier than its release (the total delay is never
// negative, even when Jitter > Delay). On a busy flow, where chunks are
// closer together than the jitter, the clamping biases delay upward towards
// Delay+Jitter. Small, spaced requests see the full uniform spread.
//
// Rate counts payload bytes only. A real link of the same nominal rate also
// carries TCP/IP headers, so it delivers roughly 3–5 % less payload.
//
// Timer precision. On Linux the Go runtime blocks in epoll_wait with a
// timeout in whole milliseconds, so a time.Timer often fires 0.1–1 ms late.
// For the last 3 ms of a wait the writers and schedulers therefore sleep on
// a timerfd read through the runtime's poller, which wakes within about
// 30–150 µs and holds no thread while it waits. The Link keeps a running
// median of that overshoot and aims that much early, so writes land within
// a few tens of µs of their due time, early or late. Longer waits start on a
// time.Timer, so Close can interrupt them (Close may wait up to 3 ms for a
// goroutine in its last stretch). A writer that has had to wait keeps one
// timerfd: with a Delay a connection uses four file descriptors, not two.
// On other systems time.Timer is used throughout.
//
// ResetAll acts at once on every live connection (SO_LINGER 0 then close, so
// both the client and the server get an RST), as a flap of the link would;
// the Link keeps accepting new connections.
//
// # Cost
//
// Four goroutines per connection (a reader and a writer each way) and one
// scheduler per direction when Rate > 0. Buffers come from a sync.Pool and
// are written with writev, so per byte the proxy does only the kernel
// copies. Per chunk it takes a few mutex operations and one or two goroutine
// wake-ups, plus a timerfd wait when a delay or rate limit makes it wait.
// Reads are 64 KiB without a rate limit (fewer wake-ups; there is no
// scheduling to be fair about) and up to 16 KiB with one. See BenchmarkThroughput:
// on a 2-core VM, unlimited, the proxy moves 1.6–2.2 GB/s at about 1 CPU
// second per GB for the whole process (sender, proxy and receiver), and a
// 4 Gbit/s limit is met.
//
// # Testing
//
// The tests check the link's decisions, recorded by an internal tracer, on
// the link's own clock and by the order of events: releases conform to the
// token bucket and never leave a backlogged link idle, a chunk is due
// exactly Delay (± Jitter) after its release and is not written earlier,
// flows are served round-robin with a fresh flow first. None asserts on a
// wall-clock duration, so a loaded machine cannot fail them. What the
// wall clock shows (the added RTT, the achieved rate) is measured by
// BenchmarkDelay and BenchmarkRate.
package netem
