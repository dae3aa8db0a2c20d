// Package status serves a daemon's live status page and the RSocket API
// behind it.
//
// Each daemon (agent, sink, xfer serve) mounts Handler on its metrics
// listener: GET / is one self-contained HTML page (embedded, no external
// script, style or font), and /rsocket is RSocket over WebSocket, which the
// page speaks with its own small client. Two routes, named by routing
// metadata in composite metadata:
//
//   - status.stream (REQUEST_STREAM): a Snapshot as JSON every Interval,
//     one per credit the requester grants (REQUEST_N is honoured: without
//     credit nothing is sent and nothing queues up).
//   - status.detail (REQUEST_RESPONSE): the metric samples behind one
//     section of the page, or the uploads of an xfer server.
//
// A Snapshot is built from what the daemons already expose: their
// Prometheus registry (gathered, names mapped by the table in metrics.go),
// their readiness func, and optional providers the daemon wires in (the
// spool quota, the store's size, the uploads in progress). When the daemon
// has tokens, every request carries one as bearer authentication metadata;
// a missing or unknown token gets ERROR[REJECTED] with a message saying
// which, and a token's identity decides what it sees (see Config.Full).
//
// docs/status.md documents the routes and payloads.
package status
