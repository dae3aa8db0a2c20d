package defaults

import (
	"slices"
	"strconv"
	"time"
)

// Size is a byte count that prints as a flag value: in the largest binary
// unit that holds it exactly (4MiB, 1536KiB, 100B), which the flags parse
// back.
type Size int64

func (s Size) String() string { return FormatSize(int64(s)) }

// FormatSize prints n bytes exactly, in the largest binary unit that
// divides it: 4MiB, 1536KiB, 1000B.
func FormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// The daemons whose flags the table lists.
const (
	Agent = "agent"
	Sink  = "sink"
)

// Entry is one flag of one or more daemons.
type Entry struct {
	// Flag is the flag's name, without dashes; it is also the key in a
	// --config file.
	Flag string
	// Daemons are the commands that have the flag with this default and
	// meaning (a flag such as max-message has one entry per daemon when
	// they differ).
	Daemons []string
	// Value is the default: a string, bool, int, time.Duration or Size.
	Value any
	// List says the flag takes a comma-separated list, so a config file
	// may give it as a YAML sequence.
	List bool
	// Meaning is one line saying what the flag sets.
	Meaning string
}

// Default is the default as the flag package prints it (flag.Flag.DefValue).
func (e Entry) Default() string {
	switch v := e.Value.(type) {
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case int:
		return strconv.Itoa(v)
	case time.Duration:
		return v.String()
	case Size:
		return v.String()
	}
	return "?"
}

// Kind names the type of the flag's value: string, bool, int, duration or
// size.
func (e Entry) Kind() string {
	switch e.Value.(type) {
	case string:
		return "string"
	case bool:
		return "bool"
	case int:
		return "int"
	case time.Duration:
		return "duration"
	case Size:
		return "size"
	}
	return "?"
}

// Of reports whether the entry belongs to daemon.
func (e Entry) Of(daemon string) bool { return slices.Contains(e.Daemons, daemon) }

// Lookup returns the entry of daemon's flag.
func Lookup(daemon, flag string) (Entry, bool) {
	for _, e := range Table {
		if e.Flag == flag && e.Of(daemon) {
			return e, true
		}
	}
	return Entry{}, false
}

var (
	agentOnly = []string{Agent}
	sinkOnly  = []string{Sink}
	both      = []string{Agent, Sink}
)

// Table lists every flag of `sluice agent` and `sluice sink`, sorted by
// flag name, then daemon.
var Table = []Entry{
	{Flag: "agent-id", Daemons: agentOnly, Value: "", Meaning: "the agent's id at the sink (empty: the id kept in the spool, created on first start)"},
	{Flag: "change-agent-id", Daemons: agentOnly, Value: false, Meaning: "let --agent-id replace the id of a spool that holds messages (its unacknowledged messages go to the sink under it)"},
	{Flag: "client-ca", Daemons: sinkOnly, Value: "", Meaning: "require client certificates signed by these CAs (PEM): mutual TLS"},
	{Flag: "compression", Daemons: agentOnly, Value: Compression, Meaning: "plain, zstd, or dict (zstd with --dict)"},
	{Flag: "compression-level", Daemons: agentOnly, Value: CompressionLevel, Meaning: "zstd effort: default, fastest (agents short of CPU) or better (short of bandwidth)"},
	{Flag: "config", Daemons: both, Value: "", Meaning: "YAML file of flag: value lines; flags on the command line override it"},
	{Flag: "data", Daemons: sinkOnly, Value: "", Meaning: "data directory: store, dictionaries, group offsets, dedup checkpoint (required)"},
	{Flag: "dead-letter-at", Daemons: agentOnly, Value: DeadLetterAt, Meaning: "spool size, or share of --spool-quota, from which messages the sink refused for good are set aside in SPOOL/dead-letter"},
	{Flag: "dict", Daemons: agentOnly, Value: "", Meaning: "trained zstd dictionary file; implies --compression dict"},
	{Flag: "export", Daemons: sinkOnly, Value: "", List: true, Meaning: "forward collectors' records to a backend: remote-write=URL or otlp=URL (repeatable; docs/export.md)"},
	{Flag: "handshake-timeout", Daemons: agentOnly, Value: time.Duration(HandshakeTimeout), Meaning: "give up on a sink that does not answer the handshake within this long"},
	{Flag: "handshake-timeout", Daemons: sinkOnly, Value: time.Duration(ListenerHandshakeTimeout), Meaning: "close a connection that has not finished its TLS and HTTP/2 handshake within this time"},
	{Flag: "hello-timeout", Daemons: sinkOnly, Value: time.Duration(HelloTimeout), Meaning: "end a stream that sent no Hello (or ReadStart) within this time"},
	{Flag: "ingest", Daemons: agentOnly, Value: IngestAddr, Meaning: "address of the ingest HTTP API (POST /v1/records, Prometheus remote-write on /api/v1/write, OTLP/HTTP on /v1/metrics, /v1/logs, /v1/traces)"},
	{Flag: "ingest-tls-cert", Daemons: agentOnly, Value: "", Meaning: "serve ingest over HTTPS with this certificate (PEM)"},
	{Flag: "ingest-tls-key", Daemons: agentOnly, Value: "", Meaning: "key of --ingest-tls-cert (PEM)"},
	{Flag: "ingest-tokens", Daemons: agentOnly, Value: "", Meaning: "require a bearer token on ingest, from this file of TOKEN CLIENT_NAME lines"},
	{Flag: "insecure-token", Daemons: agentOnly, Value: false, Meaning: "allow sending the token without TLS (loopback testing only)"},
	{Flag: "kafka-start-timeout", Daemons: sinkOnly, Value: time.Duration(KafkaStartTimeout), Meaning: "with a Kafka store, how long to keep trying to reach the brokers at startup"},
	{Flag: "keepalive-time", Daemons: sinkOnly, Value: time.Duration(SinkKeepaliveTime), Meaning: "ping a connection that has been quiet this long"},
	{Flag: "keepalive-timeout", Daemons: agentOnly, Value: time.Duration(KeepaliveTimeout), Meaning: "drop a connection whose keepalive ping is unanswered this long"},
	{Flag: "keepalive-timeout", Daemons: sinkOnly, Value: time.Duration(SinkKeepaliveTimeout), Meaning: "close a connection whose keepalive ping is unanswered this long"},
	{Flag: "linger", Daemons: agentOnly, Value: time.Duration(Linger), Meaning: "how long a message waits for more records"},
	{Flag: "listen", Daemons: sinkOnly, Value: "", Meaning: "address of the gRPC service, HOST:PORT (required)"},
	{Flag: "listen-rsocket", Daemons: sinkOnly, Value: "", Meaning: "also serve the delivery protocol over RSocket: tcp://HOST:PORT or ws://HOST:PORT/PATH"},
	{Flag: "log-level", Daemons: both, Value: LogLevel, Meaning: "debug, info, warn or error"},
	{Flag: "max-conns", Daemons: sinkOnly, Value: MaxConns, Meaning: "open gRPC connections from all addresses together; more are closed at once"},
	{Flag: "max-conns-per-peer", Daemons: sinkOnly, Value: MaxConnsPerPeer, Meaning: "connections from one IP address not yet past a Hello (after it, one session per agent id); more are closed at once"},
	{Flag: "max-consumers", Daemons: sinkOnly, Value: MaxConsumers, Meaning: "Read streams served at once; more are refused"},
	{Flag: "max-consumers-per-peer", Daemons: sinkOnly, Value: MaxConsumersPerPeer, Meaning: "Read streams served at once from one IP address, whatever its connections; more are refused"},
	{Flag: "max-message", Daemons: agentOnly, Value: Size(AgentMaxMessage), Meaning: "largest uncompressed message (records are packed up to it); at most " + FormatSize(MaxMessage)},
	{Flag: "max-message", Daemons: sinkOnly, Value: Size(SinkMaxMessage), Meaning: "largest message accepted, uncompressed; at most " + FormatSize(SinkMaxMessageLimit)},
	{Flag: "max-record", Daemons: agentOnly, Value: Size(0), Meaning: "largest record (0: what fits in a message)"},
	{Flag: "max-streams-per-conn", Daemons: sinkOnly, Value: MaxStreamsPerConn, Meaning: "concurrent streams one connection may open (each agent or consumer needs 1; a gRPC client queues those beyond, silently)"},
	{Flag: "metrics", Daemons: both, Value: "", Meaning: "serve Prometheus metrics, /healthz and /readyz on this address"},
	{Flag: "min-rto", Daemons: agentOnly, Value: time.Duration(MinRTO), Meaning: "lower bound of the adaptive resend timeout"},
	{Flag: "otlp-grpc", Daemons: agentOnly, Value: "", Meaning: "also serve OTLP/gRPC (metrics, logs, traces) on this address, with the ingest TLS and tokens (empty: off)"},
	{Flag: "progress-timeout", Daemons: agentOnly, Value: time.Duration(ProgressTimeout), Meaning: "drop a stream with messages in flight and no ack for this long"},
	{Flag: "queue-bytes", Daemons: sinkOnly, Value: Size(QueueBytes), Meaning: "payload bytes each agent stream may have queued for storage (its credit)"},
	{Flag: "queue-messages", Daemons: sinkOnly, Value: QueueMessages, Meaning: "messages each agent stream may have queued for storage (its credit)"},
	{Flag: "reconnect-max", Daemons: agentOnly, Value: time.Duration(ReconnectMax), Meaning: "longest wait between reconnection attempts (back-off from " + ReconnectMin.String() + "; bounds gRPC's own connect back-off too)"},
	{Flag: "rsocket-resume", Daemons: both, Value: false, Meaning: "resumable RSocket connections: sessions survive a broken connection, nothing resent (agent and sink both need it)"},
	{Flag: "sink", Daemons: agentOnly, Value: "", List: true, Meaning: "the sink's address, HOST:PORT; several to fail over between them (required)"},
	{Flag: "spool", Daemons: agentOnly, Value: "", Meaning: "spool directory, created if missing (required)"},
	{Flag: "spool-quota", Daemons: agentOnly, Value: Size(SpoolQuota), Meaning: "spool size on disk at which ingest answers 507"},
	{Flag: "spool-sync", Daemons: agentOnly, Value: SpoolSync, Meaning: "spool durability: always (fsync before answering), none, or an interval"},
	{Flag: "stall-timeout", Daemons: agentOnly, Value: time.Duration(StallTimeout), Meaning: "end a collector's request (--otlp-grpc message; remote-write or OTLP/HTTP body) that holds " + FormatSize(StallBytes) + "+ and got less than that more of it in this time"},
	{Flag: "stall-timeout", Daemons: sinkOnly, Value: time.Duration(StallTimeout), Meaning: "close a connection whose stream holds " + FormatSize(StallBytes) + "+ of a message and sent less than that more of it in this time"},
	{Flag: "store", Daemons: sinkOnly, Value: Store, Meaning: "embedded (a log in --data) or kafka://HOST:PORT[,...]/TOPIC"},
	{Flag: "tls-ca", Daemons: agentOnly, Value: "", Meaning: "connect to the sink with TLS, trusting this CA bundle (PEM)"},
	{Flag: "tls-cert", Daemons: agentOnly, Value: "", Meaning: "client certificate for mutual TLS (PEM)"},
	{Flag: "tls-cert", Daemons: sinkOnly, Value: "", Meaning: "serve TLS with this certificate (PEM); needs --tls-key"},
	{Flag: "tls-key", Daemons: agentOnly, Value: "", Meaning: "client key for mutual TLS (PEM)"},
	{Flag: "tls-key", Daemons: sinkOnly, Value: "", Meaning: "key of --tls-cert (PEM)"},
	{Flag: "tls-server-name", Daemons: agentOnly, Value: "", Meaning: "expected server name (empty: the host of the address)"},
	{Flag: "token", Daemons: agentOnly, Value: "", Meaning: "bearer token identifying this agent to the sink"},
	{Flag: "token-file", Daemons: agentOnly, Value: "", Meaning: "read the bearer token from this file"},
	{Flag: "tokens", Daemons: sinkOnly, Value: "", Meaning: "require a bearer token on every call, from this file of TOKEN AGENT_ID lines"},
	{Flag: "window", Daemons: agentOnly, Value: Window, Meaning: "in-flight messages: auto (bandwidth-delay product) or a number"},
}
