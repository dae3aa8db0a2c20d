package sink

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/wire"
)

// HTTP2WindowBytes is the HTTP/2 stream window of both the sink and the
// agent (wire.InitialWindowSize): at least DefaultQueueBytes, so that
// credits, not HTTP/2, bound what is in flight (see the server options).
const HTTP2WindowBytes = wire.InitialWindowSize

// The stream window must hold the default byte credit (a negative array
// length does not compile).
var _ [HTTP2WindowBytes - DefaultQueueBytes]struct{}

// Defaults for zero Config fields; the values, and why, are in
// internal/defaults.
const (
	// DefaultQueueMessages and DefaultQueueBytes size each Send stream's
	// queue in front of the storage writer, which is also the credit an
	// agent gets, so they must cover the bandwidth-delay product: 64 MiB
	// is a 1 Gbit/s link at 500 ms RTT. The bytes bound memory; the count
	// only guards against floods of tiny messages, and must not bind
	// first: the 16 KB messages of "Asynchronous Messaging Over gRPC" are
	// 4,000 in flight on that link (its fixed window of 100 was one of its
	// limits).
	DefaultQueueMessages = defaults.QueueMessages
	DefaultQueueBytes    = defaults.QueueBytes
	// DefaultMaxMessageBytes is the largest batch accepted, uncompressed
	// (and compressed), as announced in Welcome.max_message_bytes.
	DefaultMaxMessageBytes = defaults.SinkMaxMessage
	// DefaultCheckpointInterval and DefaultCheckpointBytes: the dedup
	// checkpoint is written when this much time has passed, or this many
	// bytes were stored, since the last one (and at Close), so a restart
	// re-reads at most about that much of the store.
	DefaultCheckpointInterval = defaults.CheckpointInterval
	DefaultCheckpointBytes    = defaults.CheckpointBytes
	// DefaultWriteBatchBytes bounds one group commit.
	DefaultWriteBatchBytes = defaults.WriteBatchBytes
	// DefaultMaxStreamsPerConn, DefaultMaxConnsPerPeer, DefaultMaxConsumers
	// and DefaultHelloTimeout bound what one client can make the sink hold
	// (see Config). An agent uses one connection and one stream, a
	// consumer one of each, so they leave room for many processes per
	// host (NAT, tests on loopback) while capping an abuser's memory.
	DefaultMaxStreamsPerConn = defaults.MaxStreamsPerConn
	DefaultMaxConnsPerPeer   = defaults.MaxConnsPerPeer
	DefaultMaxConsumers      = defaults.MaxConsumers
	// DefaultMaxConsumersPerPeer: see Config.MaxConsumersPerPeer.
	DefaultMaxConsumersPerPeer = defaults.MaxConsumersPerPeer
	DefaultHelloTimeout        = defaults.HelloTimeout
	// DefaultMaxConns: see Config.MaxConns.
	DefaultMaxConns = defaults.MaxConns
	// DefaultStallTimeout: see Config.StallTimeout.
	DefaultStallTimeout = defaults.StallTimeout
	// DefaultKafkaStartTimeout bounds how long New waits for the Kafka
	// brokers to answer.
	DefaultKafkaStartTimeout = defaults.KafkaStartTimeout
	// DefaultShutdownTimeout bounds how long Close waits for the streams
	// to get what they queued stored and acked.
	DefaultShutdownTimeout = defaults.ShutdownTimeout
)

// MaxMessageBytesLimit is the largest MaxMessageBytes allowed.
const MaxMessageBytesLimit = defaults.SinkMaxMessageLimit

// maxAgentID is the longest Hello.agent_id accepted, in bytes.
const maxAgentID = defaults.MaxAgentIDLen

// Config configures a Sink. Only DataDir is required; every zero field
// takes the default its comment gives.
type Config struct {
	// DataDir holds all the sink's state: the store (DataDir/store, a
	// seglog with SyncAlways, unless Store is Kafka), the dictionaries
	// agents uploaded (DataDir/dicts/AGENT/ID.zdict), consumer group
	// offsets (DataDir/groups/GROUP; in Kafka with a Kafka store) and the
	// dedup checkpoint (DataDir/dedup.checkpoint, or
	// DataDir/kafka-dedup.checkpoint). Created if missing; required with
	// either store.
	DataDir string

	// Store says where messages are stored. "" or "embedded": the sink's
	// own seglog in DataDir/store. "kafka://HOST:PORT[,HOST:PORT...]/TOPIC"
	// (optionally followed by ?partitions=N&replication=N, used when the
	// sink creates the topic): one Kafka record per record of each
	// message, acked once Kafka acknowledged them all (see
	// docs/architecture.md, "Kafka store").
	Store string

	// QueueMessages and QueueBytes bound each Send stream's queue of
	// messages received and not yet stored; they are the credits granted
	// to the agent (Welcome.credits). Defaults DefaultQueueMessages and
	// DefaultQueueBytes.
	QueueMessages int
	QueueBytes    int64

	// MaxMessageBytes is the largest batch accepted, uncompressed, and the
	// largest payload as sent (Welcome.max_message_bytes). Default 4 MiB;
	// at most MaxMessageBytesLimit.
	MaxMessageBytes int64

	// TLS, if not nil, serves over TLS with this configuration (see
	// auth.ServerTLS, which also sets up mutual TLS). Nil serves plaintext.
	TLS *tls.Config

	// Tokens, if not nil, requires a bearer token on every call: an agent
	// token for Send, with Hello.agent_id equal to the token's agent id,
	// and a consumer ("*") token for Read. Nil means no authentication.
	Tokens *auth.Tokens

	// Logger receives the sink's structured logs. Default slog.Default().
	Logger *slog.Logger

	// Registry is where the sink registers its metrics. Default: a new
	// registry of its own, returned by Sink.Registry.
	Registry *prometheus.Registry

	// CheckpointInterval and CheckpointBytes say how often the dedup
	// index is checkpointed: once this much time has passed or this many
	// bytes were stored since the last checkpoint. Defaults 30s and
	// 256 MiB.
	CheckpointInterval time.Duration
	CheckpointBytes    int64

	// WriteBatchBytes bounds the bytes of one group commit. Default 32 MiB.
	WriteBatchBytes int64

	// SegmentBytes is the store's segment size. Default: seglog's (64 MiB).
	SegmentBytes int64

	// ShutdownTimeout bounds how long Close waits for each stream's queued
	// messages to be stored and acked before cutting the streams.
	// Default 10s.
	ShutdownTimeout time.Duration

	// MaxStreamsPerConn caps the concurrent streams of one connection
	// (HTTP/2 MAX_CONCURRENT_STREAMS; a gRPC client queues the streams
	// beyond it, silently; a connection reaching it is counted and logged).
	// Default 256 (RFC 9113 §5.1.2: no less than 100).
	MaxStreamsPerConn int

	// MaxConnsPerPeer caps the open connections from one IP address that
	// have not proven an identity (no Send session past its Hello and
	// authentication); further ones are closed at once. A connection
	// carrying such a session does not count: after the Hello the bound
	// is one live session per agent id. Default 64.
	MaxConnsPerPeer int

	// MaxConns caps the open gRPC connections from all addresses
	// together, identified or not; further ones are closed at once.
	// Default DefaultMaxConns.
	MaxConns int

	// MaxConsumers caps the Read streams served at once; further ones end
	// with ResourceExhausted. Default 1024. What they hold is bounded by
	// the shared read budget (64 MiB of read chunks over all Read
	// streams, 64 KiB each with 1024), not by the count.
	MaxConsumers int

	// MaxConsumersPerPeer caps the Read streams served at once from one IP
	// address, whatever its connections; further ones end with
	// ResourceExhausted. One client (or one address full of connections)
	// then takes at most this share of MaxConsumers and cannot lock the
	// other consumers out. Default 256: what MaxConsumers was before it
	// existed, so that a fleet of consumers behind one NAT address that
	// was served then still is, and at least the 200 followers one
	// client may open over one connection. Read streams of in-memory
	// transports, which have no IP address, share one count.
	MaxConsumersPerPeer int

	// HelloTimeout: a Send stream that has not sent its Hello (or a Read
	// stream its ReadStart) within this time is ended with
	// DeadlineExceeded, so that silent streams hold no memory and do not
	// delay shutdown. Default 10s.
	HelloTimeout time.Duration

	// StallTimeout: a connection with a stream that holds at least
	// defaults.StallBytes (64 KiB) of an incomplete message, and has
	// received less than that much more of it in this time while free to
	// send, is closed, so that a client cannot hold up to MaxMessageBytes
	// of memory per stream by beginning a message and stopping (or
	// trickling it). Default 60s.
	StallTimeout time.Duration

	// HandshakeTimeout bounds a new connection's HTTP/2 handshake (and
	// its TLS handshake): a client that connects and says nothing, or
	// stops in the middle of its preface or first SETTINGS, is closed
	// after it (gRPC's own default is 120 s). Default 10s.
	HandshakeTimeout time.Duration

	// KeepaliveTime and KeepaliveTimeout: a connection quiet for
	// KeepaliveTime is pinged, and closed when the answer does not come
	// within KeepaliveTimeout (a half-open agent, or a client that stopped
	// in the middle of a frame and reads nothing). Defaults 30s and 10s
	// (defaults.SinkKeepaliveTime and SinkKeepaliveTimeout).
	KeepaliveTime, KeepaliveTimeout time.Duration

	// KafkaStartTimeout bounds how long New keeps trying to reach the
	// Kafka brokers (and waits for the topic to be ready) before failing.
	// Default 30s.
	KafkaStartTimeout time.Duration

	// OnStoreSync, if set, is called after every fdatasync of the embedded
	// store, on the storage writer's goroutine: the simulation
	// (internal/lab/sim) records what a crash would keep.
	OnStoreSync func()

	// AskKafkaRecords makes sessions ask agents that can for Kafka
	// records sections (Welcome.codec kafka_zstd) whatever the store,
	// which a store that does not take them gets converted, as from an
	// agent that sent them unasked. No flag sets it: the simulation
	// (internal/lab/sim) uses it to run the agent's Kafka sealing (ids
	// predicted at seal, across crashes; the write loop's conversion
	// when a restarted sink stops asking) against the embedded store it
	// checks.
	AskKafkaRecords bool

	// beforeCommit, if set, runs on the storage writer before each group
	// commit; tests use it to hold the writer.
	beforeCommit func()

	// helloWait, if set, runs when a stream starts waiting for its first
	// message; tests use it to know the handler is there.
	helloWait func()

	// tailHold, if set, holds the Kafka tailer until it is closed; tests
	// use it to show that writes wait for the tailer.
	tailHold <-chan struct{}
}

func (c *Config) setDefaults() {
	if c.QueueMessages == 0 {
		c.QueueMessages = DefaultQueueMessages
	}
	if c.QueueBytes == 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.CheckpointBytes == 0 {
		c.CheckpointBytes = DefaultCheckpointBytes
	}
	if c.WriteBatchBytes == 0 {
		c.WriteBatchBytes = DefaultWriteBatchBytes
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.MaxStreamsPerConn == 0 {
		c.MaxStreamsPerConn = DefaultMaxStreamsPerConn
	}
	if c.MaxConnsPerPeer == 0 {
		c.MaxConnsPerPeer = DefaultMaxConnsPerPeer
	}
	if c.MaxConsumers == 0 {
		c.MaxConsumers = DefaultMaxConsumers
	}
	if c.MaxConsumersPerPeer == 0 {
		c.MaxConsumersPerPeer = DefaultMaxConsumersPerPeer
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.HelloTimeout == 0 {
		c.HelloTimeout = DefaultHelloTimeout
	}
	if c.KafkaStartTimeout == 0 {
		c.KafkaStartTimeout = DefaultKafkaStartTimeout
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.KeepaliveTime == 0 {
		c.KeepaliveTime = defaults.SinkKeepaliveTime
	}
	if c.KeepaliveTimeout == 0 {
		c.KeepaliveTimeout = defaults.SinkKeepaliveTimeout
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = defaults.ListenerHandshakeTimeout
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("DataDir is required"))
	}
	if c.QueueMessages < 1 || c.QueueBytes < 1 {
		errs = append(errs, fmt.Errorf("queue capacity %d messages, %d bytes: both must be positive", c.QueueMessages, c.QueueBytes))
	}
	if c.MaxMessageBytes < 1 || c.MaxMessageBytes > MaxMessageBytesLimit {
		errs = append(errs, fmt.Errorf("MaxMessageBytes (--max-message) %s outside 1B to %s", defaults.FormatSize(c.MaxMessageBytes), defaults.FormatSize(MaxMessageBytesLimit)))
	}
	if _, _, err := parseStore(c.Store); err != nil {
		errs = append(errs, err)
	}
	if c.MaxStreamsPerConn < 0 || c.MaxConnsPerPeer < 0 || c.MaxConsumers < 0 || c.MaxConsumersPerPeer < 0 || c.HelloTimeout < 0 {
		errs = append(errs, errors.New("negative stream, connection or consumer limit, or hello timeout"))
	}
	if c.MaxConns < 0 {
		errs = append(errs, errors.New("negative MaxConns"))
	}
	if c.HandshakeTimeout < 0 || c.KeepaliveTime < 0 || c.KeepaliveTimeout < 0 {
		errs = append(errs, errors.New("negative handshake or keepalive timeout"))
	}
	if c.CheckpointInterval < 0 || c.CheckpointBytes < 0 || c.WriteBatchBytes < 0 || c.ShutdownTimeout < 0 || c.SegmentBytes < 0 || c.KafkaStartTimeout < 0 || c.StallTimeout < 0 {
		errs = append(errs, errors.New("negative interval, size or timeout"))
	}
	if len(errs) > 0 {
		return defaults.InvalidConfig("sink", errs)
	}
	return nil
}
