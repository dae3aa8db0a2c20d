// Package conn is the RSocket connection state machine: everything one end
// of an RSocket Protocol 1.0 connection must decide, with no I/O inside.
//
// It is built the way etcd's raft is built. A Machine has no goroutines, no
// sockets and no clock. Inputs are frames (Receive), the passing of time
// (Tick, with a monotonic now supplied by the caller) and application
// commands (RequestStream, SendPayload, RequestN, Cancel, ...). Outputs are
// data: frames appended to an outbound byte buffer and a slice of Events
// for the application, both collected by Ready and released by Advance. A
// driver (a TCP or WebSocket loop, or a test) owns the I/O:
//
//	m, _ := conn.New(cfg, now())
//	m.Start(now())                       // client: queues SETUP
//	for {
//		rd := m.Ready()
//		conn.Write(rd.Out)                  // frames, each with its 24-bit length
//		for _, ev := range rd.Events { app(ev) } // may call m.SendPayload etc.
//		m.Advance()
//		if t, ok := m.NextDeadline(); ok { timer.Reset(t - now()) }
//		select {
//		case f := <-frames:  m.Receive(now(), f)
//		case <-timer.C:      m.Tick(now())
//		case <-closed:       m.TransportClosed(err)
//		}
//	}
//
// Because the machine is deterministic, the tests run two of them back to
// back through an in-memory pipe under a seeded scheduler (sim_test.go) and
// check the protocol invariants over thousands of interleavings; the
// sub-machine of a stream is specified by a reviewed table of every state
// and input (testdata/stream_table.golden).
//
// # Streams
//
// Every stream is a small sub-machine (stream.go) with two halves: the half
// we send PAYLOADs on and the half we receive them on, each open or closed,
// each with REQUEST_N credits (credits.go). Which halves start open depends
// on the interaction (request-response, fire-and-forget, stream, channel)
// and on whether this end is the requester or the responder; the stream is
// forgotten when both halves are closed, on CANCEL and on ERROR. Credits are
// cumulative and saturate at 2^31-1, which is a number of items, not
// "unbounded": every PAYLOAD consumes one, so a stream continues after
// 2^31-1 items when more credits arrive (rsocket-java #1110 stalls there).
// The application is refused (ErrNoCredits) when it sends beyond its
// credits; a peer that does is answered with ERROR[INVALID] on the stream
// (CANCEL when we are the requester of a request-response or stream, which
// may not send ERROR) and the application gets an Error event.
//
// Stream ids: a client uses odd ids from 1, a server even ids from 2, and
// neither ever reuses one within a connection (ErrStreamIDsExhausted after
// 2^31-1). A request from the peer with the wrong parity, or on a stream id
// in use, is ignored, as Protocol.md "Handling the Unexpected" requires. The
// peer's ids may arrive out of order (peers that write requests from many
// goroutines do), so an id below the highest seen still opens a stream.
//
// # Fragmentation and memory
//
// Outbound payloads that do not fit Config.MaxFrameSize (never more than
// 16,777,215 bytes) are split into a REQUEST_* or PAYLOAD frame followed by
// PAYLOAD fragments with the F flag, metadata before data, C only on the
// last fragment; a fragmented payload costs one credit. MaxPayloadSize
// bounds every inbound payload, whole or reassembled, requests and PAYLOADs
// alike (metadata plus data): a request over it is answered ERROR[INVALID]
// on its stream with no state kept and no EventRequest (a fire-and-forget
// is dropped unanswered and counted in OversizeFNFDropped), a PAYLOAD over
// it fails its stream (ERROR[INVALID], or CANCEL from the requester of a
// request-response or stream), its buffer dropped. MaxReassemblyBytes
// bounds all reassemblies of a connection together (exceeded:
// ERROR[CONNECTION_ERROR], the connection closes).
// MaxStreams bounds the live streams: a request from the peer beyond it is
// answered ERROR[REJECTED] (nothing was processed) and keeps no state; the
// application's own request beyond it is refused with ErrTooManyStreams.
//
// # Connection
//
// A client queues SETUP (version 1.0, keepalive interval, max lifetime,
// MIME types, the L flag) on Start. With lease negotiated (lease.go) each
// requester waits for a LEASE and stays within it (ErrNoLease): the
// request commands take the time now, an expired LEASE allows nothing,
// and NextDeadline includes its expiry. Each responder answers requests
// beyond the LEASE it sent with ERROR[REJECTED]. Both LEASEs are
// forgotten with the transport: after a resume each responder must send
// a new one. A server requires SETUP as the first frame: anything else
// is ERROR[INVALID_SETUP], a RESUME is ERROR[REJECTED_RESUME] (a new
// machine has no session; a server driver with sessions calls
// AcceptResume instead), a SETUP with the R flag is ERROR[REJECTED_SETUP]
// unless Config.Resume, one with the L flag ERROR[UNSUPPORTED_SETUP]
// unless Config.Lease, a version other than 1.0 (1.1 too) is
// ERROR[UNSUPPORTED_SETUP]; each closes the connection. A RESUME on an
// established connection is ERROR[CONNECTION_ERROR] and a close; a second
// SETUP is ignored. The accepted SETUP reaches the application as
// EventSetup, which may still refuse it with Close(ErrorCodeRejectedSetup,
// reason).
//
// Keepalive: on Tick the client queues KEEPALIVE with R when its interval
// has elapsed; either end echoes a KEEPALIVE with R (R cleared, same data).
// When no frame at all has arrived for the max lifetime, the machine sends
// ERROR[CONNECTION_ERROR], fails every stream and closes (rsocket-java
// #1118 does not close). NextDeadline gives the one instant the driver must
// call Tick at.
//
// Byte credits (bytecredits.go, Config.ByteCredits): sluice's optional
// extension that limits the elements of a stream or channel by bytes as
// well as by REQUEST_N items. It is negotiated with an EXT frame carrying
// the I flag right after SETUP, so a peer without it ignores it; on a
// governed stream a sender needs an item credit and a positive byte
// credit, and a receiver fails a stream that overruns either with
// ERROR[INVALID]. The wire format is specified in docs/rsocket.md.
//
// Resumption (resume.go, docs/rsocket-resume.md): positions count the
// bytes of every frame on a stream other than 0 (rsocket-java's counting;
// Positions). With Config.ResumeToken (client) or Config.Resume (server
// accepting a SETUP with R) sent stream frames are retained, bounded by
// Config.ResumeBufferBytes and trimmed by the peer's KEEPALIVE position;
// TransportClosed keeps the session (EventReconnect) for
// Config.ResumeSessionLifetime; Reconnected (client) and AcceptResume
// (server) resume it and replay what the peer lacks, exactly once. Without
// resumption RESUME and RESUME_OK are rejected or ignored as a peer
// without resume must. Across a server restart (restore.go): ResumeImage
// is what a server must keep of a session, Restore rebuilds it in another
// process with its link down; after the RESUME the streams that were open
// end with APPLICATION_ERROR or CANCEL, since their handlers are gone.
//
// # Ownership
//
// Receive copies what it keeps: the caller may reuse the frame buffer as
// soon as Receive returns, unless Config.LendFrames lets the events'
// bytes alias the frame (then the caller keeps it unchanged until
// Advance, and saves a copy of every payload). The slices in Events and
// Ready.Out are valid until Advance; copy them to keep them, except an
// event marked Owned (a reassembled payload, built for it alone) and the
// output taken with TakeOut, which are the caller's. Byte slices passed to
// commands are copied into the outbound buffer before the command returns.
package conn
