// Package defaults is the one place that holds sluice's defaults and
// limits: sizes, windows, timeouts, quotas, deadlines and caps. The agent,
// the sink, the delivery state machine and the command-line flags take
// their values from here, so a default cannot differ between a Config
// field, its doc and its flag.
//
// Table lists every flag of `sluice agent` and `sluice sink` with its
// default; `sluice config defaults` prints it, docs/configuration.md holds
// a copy that a test keeps equal, and cmd/sluice registers every flag of
// the two daemons with the default found here (a test walks the FlagSets
// and compares). This package imports nothing of sluice, so every package
// may import it.
//
// It also holds how sizes and counts are written for people, the same in
// every command's output and every package's messages: FormatSize,
// HumanSize, Plural.
package defaults

import "time"

// Protocol limits, shared by the agent and the sink.
const (
	// MaxMessage is the largest message, uncompressed, that an agent may
	// send: the sink's default --max-message, so an agent's largest
	// message is accepted by a sink with default settings.
	MaxMessage = 4 << 20
	// SinkMaxMessageLimit is the largest --max-message a sink accepts.
	SinkMaxMessageLimit = 256 << 20
	// MaxAgentIDLen is the longest agent id (Hello.agent_id), in bytes.
	MaxAgentIDLen = 255
)

// Agent defaults.
const (
	// AgentMaxMessage is the agent's default --max-message: records are
	// packed into messages up to this size, uncompressed.
	AgentMaxMessage = 256 << 10
	// MinAgentMaxMessage is the smallest --max-message an agent accepts.
	MinAgentMaxMessage = 1 << 10
	// SpoolQuota is the spool's default size on disk (--spool-quota).
	SpoolQuota = 1 << 30
	// MinSpoolQuota is the smallest spool quota (it must also hold four
	// messages).
	MinSpoolQuota = 2 << 20
	// DeadLetterAt is the agent's default --dead-letter-at: messages the
	// sink refused for good are set aside once the spool holds half its
	// quota, the point where an acknowledged active segment is no longer
	// kept either.
	DeadLetterAt = "50%"
	// SpoolSegmentMin and SpoolSegmentMax bound a spool segment, which is
	// an eighth of the quota.
	SpoolSegmentMin = 1 << 20
	SpoolSegmentMax = 64 << 20
	// Linger is how long a message waits for more records.
	Linger = 5 * time.Millisecond
	// Compression is the default codec: plain, zstd or dict.
	Compression = "zstd"
	// CompressionLevel is the agent's default --compression-level.
	CompressionLevel = "default"
	// Window is the default in-flight window: auto sizes it to the
	// measured bandwidth-delay product.
	Window = "auto"
	// SpoolSync is the spool's default durability (seglog.ParseSyncPolicy).
	SpoolSync = "always"
	// SpoolIDReservation is how many message ids the spool reserves at a
	// time under --spool-sync interval or none (seglog's
	// WithOffsetReservation): one small fsynced file per this many
	// messages, and at most this many ids skipped by a restart after a
	// crash, so that no id the sink may hold is given to a new message.
	SpoolIDReservation = 1 << 14
	// InitialRTO, MinRTO and MaxRTO are RFC 6298's: over one ordered
	// stream a timeout only fires if the sink lost a message without
	// breaking the stream, so resending early buys little.
	InitialRTO = time.Second
	MinRTO     = time.Second
	MaxRTO     = 60 * time.Second
	// ReconnectMin and ReconnectMax bound the jittered, doubling reconnect
	// back-off; a failover to the next sink must not wait long.
	// MinReconnectMax is the smallest --reconnect-max accepted.
	ReconnectMin    = 100 * time.Millisecond
	ReconnectMax    = 5 * time.Second
	MinReconnectMax = 10 * time.Millisecond
	// HandshakeTimeout bounds the wait for the sink's Welcome.
	HandshakeTimeout = 10 * time.Second
	// ProgressTimeout is how long messages may stay in flight with no ack
	// at all before the stream is taken for dead: far above a healthy
	// sink's commit latency, and still failover within 30 s.
	ProgressTimeout = 20 * time.Second
	// KeepaliveTime is the idle time after which the agent pings the sink
	// (gRPC clients cannot ping more often than every 10 s).
	KeepaliveTime = 10 * time.Second
	// KeepaliveTimeout is how long a ping may go unanswered.
	KeepaliveTimeout = 10 * time.Second
	// IngestAddr is where the agent's ingest HTTP API listens.
	IngestAddr = "127.0.0.1:7401"
	// IngestReadHeaderTimeout bounds how long an ingest client may take to
	// send its request headers; IngestShutdownTimeout how long in-flight
	// ingest requests get at shutdown.
	IngestReadHeaderTimeout = 10 * time.Second
	IngestShutdownTimeout   = 10 * time.Second
	// IngestBodyIdleTimeout ends an ingest request whose body sends
	// nothing for this long (408): a client frozen mid-body would
	// otherwise hold its handler and buffer forever. Only silence counts,
	// so a slow link is not cut off.
	IngestBodyIdleTimeout = 30 * time.Second
	// IngestMaxConns is how many connections each agent listener (ingest
	// HTTP, OTLP/gRPC) serves at once; the rest wait in the kernel's
	// accept queue, costing nothing, until one closes. Unbounded, clients
	// resetting in a loop outran the handlers and thousands of
	// connections' buffers were the heap (the same fault as xfer serve's
	// and the status listener's, docs/reliability.md).
	IngestMaxConns = 1024
	// IngestIdleConnTimeout closes an ingest keep-alive connection that
	// brings no next request, so that none holds its slot for good.
	IngestIdleConnTimeout = 60 * time.Second
)

// Sink defaults.
const (
	// QueueMessages and QueueBytes size each Send stream's queue in front
	// of the storage writer, which is also the credit an agent gets, so
	// they must cover the bandwidth-delay product: 64 MiB is a 1 Gbit/s
	// link at 500 ms RTT. The bytes bound memory; the count only guards
	// against floods of tiny messages and must not bind first.
	QueueMessages = 8192
	QueueBytes    = 64 << 20
	// SinkMaxMessage is the sink's default --max-message.
	SinkMaxMessage = MaxMessage
	// CheckpointInterval and CheckpointBytes: the dedup checkpoint is
	// written when this much time has passed, or this many bytes were
	// stored, since the last one.
	CheckpointInterval = 30 * time.Second
	CheckpointBytes    = 256 << 20
	// WriteBatchBytes bounds one group commit.
	WriteBatchBytes = 32 << 20
	// MaxStreamsPerConn, MaxConnsPerPeer, MaxConsumers and HelloTimeout
	// bound what one client can make the sink hold. MaxStreamsPerConn is
	// HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: RFC 9113 §5.1.2 recommends
	// no less than 100, and gRPC clients queue the streams beyond it
	// without an error (with 16, the 17th follower on a channel waited
	// forever). It is MaxConsumersPerPeer, so one connection can carry
	// every consumer the sink serves one address; their memory is
	// bounded by the shared read budget, not by this. MaxConsumers is
	// four addresses' worth, so one client taking its whole share leaves
	// the others three quarters (256 was the total before the share per
	// address existed, and one client could take it all).
	MaxStreamsPerConn   = 256
	MaxConnsPerPeer     = 64
	MaxConsumers        = 1024
	MaxConsumersPerPeer = 256
	HelloTimeout        = 10 * time.Second
	// ListenerHandshakeTimeout bounds a gRPC listener's handshake with a
	// new connection (TLS, the HTTP/2 preface and SETTINGS): the sink's
	// and xfer's. gRPC's default is 120 s.
	ListenerHandshakeTimeout = 10 * time.Second
	// SinkKeepaliveTime and SinkKeepaliveTimeout: the sink pings a
	// connection quiet for SinkKeepaliveTime and closes it when the ping
	// is not answered within SinkKeepaliveTimeout, so a half-open agent
	// (host gone, NAT entry dropped) is found within about 40 s.
	SinkKeepaliveTime    = 30 * time.Second
	SinkKeepaliveTimeout = 10 * time.Second
	// StallTimeout and StallBytes put a deadline on a partial message: a
	// connection with a stream holding at least StallBytes of an
	// incomplete message that received less than StallBytes more of it in
	// StallTimeout (while free to send) is closed. So a message larger
	// than StallBytes must arrive at 64 KiB a minute (about 1.1 KB/s) or
	// faster; a trickle cannot hold a partial message for long.
	StallTimeout = time.Minute
	StallBytes   = 64 << 10
	// MaxConns caps the sink's open gRPC connections from all addresses
	// together: what bounds its file descriptors and connection memory
	// when MaxConnsPerPeer does not (connections past a Hello, whose
	// agent ids, without authentication, are whatever clients claim).
	MaxConns = 16384
	// KafkaStartTimeout bounds how long the sink keeps trying to reach
	// the Kafka brokers at startup.
	KafkaStartTimeout = 30 * time.Second
	// ShutdownTimeout bounds how long the sink's Close waits for queued
	// messages to be stored and acked.
	ShutdownTimeout = 10 * time.Second
	// Store is the default store: a log in --data.
	Store = "embedded"
)

// LogLevel is both daemons' default --log-level.
const LogLevel = "info"

// Defaults of `sluice demo`'s own flags (its agent flags are the agent's).
const (
	DemoDuration = 20 * time.Second
	DemoFeeders  = 16
	DemoLogLevel = "warn"
)
