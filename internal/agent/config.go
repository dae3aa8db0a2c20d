package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/agent/ingest"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
	"github.com/sluicehq/sluice/seglog"
)

// Config configures an Agent. Zero fields take the documented defaults.
type Config struct {
	// SinkAddr is the sink's gRPC address, HOST:PORT, or several separated
	// by commas: each (re)connection goes to the next one, so the agent
	// fails over between sinks that share a store (a Kafka topic).
	// Required.
	SinkAddr string
	// SpoolDir holds the spool log, the agent id and the acknowledged
	// watermark. Required.
	SpoolDir string
	// AgentID names the agent to the sink (Hello.agent_id, the tokens
	// file's AGENT_ID). Default: the id persisted in the spool, or on first
	// start a random "agent-…" id, which is then persisted. A spool keeps
	// its id for life: New refuses an AgentID that differs from the one
	// already persisted, since the sink deduplicates by (agent id, message
	// id). At most 255 bytes, no whitespace.
	AgentID string
	// ChangeAgentID lets AgentID replace the id a spool holding messages
	// was created with (spool.OpenChangingID), where New would refuse it:
	// the way out for a spool whose sink holds ids another spool numbered
	// under its id (the sink refuses it, protocol.IDsTakenDetail).
	ChangeAgentID bool
	// SpoolQuota bounds the spool's size on disk; ingest beyond it fails
	// with ErrSpoolFull (HTTP 507) until the sink catches up. Default 1 GiB;
	// at least 2 MiB and four messages. Spool segments are sized from it
	// and from the room on the spool's disk (an eighth of the smaller,
	// within [1 MiB, 64 MiB], and room for a message), so acknowledged
	// messages free space in steps well below the quota and the disk.
	SpoolQuota int64
	// SpoolSync is the spool's durability. Default seglog.SyncAlways():
	// ingest answers only after fdatasync.
	SpoolSync seglog.SyncPolicy
	// MaxMessageBytes bounds the uncompressed size of one message (records
	// are packed until it is reached). Default 256 KiB, at most 4 MiB.
	MaxMessageBytes int
	// MaxRecordBytes bounds one record; larger ones fail with
	// ErrRecordTooLarge (HTTP 413). Default MaxMessageBytes minus framing.
	MaxRecordBytes int
	// Linger is how long a message waits for more records before it is
	// sealed. Default 5ms.
	Linger time.Duration
	// Compression is codec.Plain, codec.Zstd (default) or codec.ZstdDict
	// (requires Dictionary).
	Compression codec.Kind
	// CompressionLevel is zstd's effort (default codec.LevelDefault;
	// codec.LevelFastest for agents short of CPU). A dictionary is tuned
	// for the default level.
	CompressionLevel codec.Level
	// Dictionary is a trained zstd dictionary (see `sluice dict train`);
	// it is uploaded to the sink before the first message that uses it.
	Dictionary *codec.Dictionary
	// MaxInFlightMsgs and MaxInFlightBytes fix the window; both zero (the
	// default) sizes it to the measured bandwidth-delay product.
	MaxInFlightMsgs  int
	MaxInFlightBytes int64
	// MinRTO bounds the adaptive resend timeout from below. Default 1s.
	MinRTO time.Duration
	// ReconnectMin and ReconnectMax bound the reconnect back-off (jittered,
	// doubling per consecutive failure). Defaults 100ms and 5s: a failover
	// to the next sink must not wait long.
	ReconnectMin, ReconnectMax time.Duration
	// HandshakeTimeout bounds the wait for the sink's Welcome (default
	// 10s); ProgressTimeout is how long messages may be in flight with no
	// ack before the stream is taken for dead (default 20s);
	// KeepaliveTimeout is how long a gRPC keepalive ping (sent after 10s
	// without traffic) may go unanswered (default 10s). Each ends the
	// stream and reconnects to the next sink. See health.go.
	HandshakeTimeout, ProgressTimeout, KeepaliveTimeout time.Duration
	// GRPC is how the agent reaches the sinks over gRPC: TLS (default
	// plaintext), bearer token; the agent sets the keepalive from
	// KeepaliveTimeout.
	GRPC grpctransport.ClientOptions
	// RSocketResume makes connections to rsocket+ sinks resumable: a
	// broken connection is dialled again and its session goes on, nothing
	// resent (the sink needs resumption on too: --rsocket-resume).
	RSocketResume bool
	// Dialer, when set, replaces gRPC: every connection attempt opens a
	// session through it, and SinkAddr only names the sinks in logs (one
	// name per attempt in turn). Tests and the simulation pass a
	// memconn.Dialer.
	Dialer protocol.Dialer
	// IngestTokens, when set, makes the ingest API require
	// "Authorization: Bearer TOKEN" with a token of this set (HTTP 401
	// otherwise); see auth.LoadTokens for the file format, whose second
	// field names the client. Put ingest behind TLS too, or tokens travel
	// in clear text.
	IngestTokens *auth.Tokens
	// SetAsideAt is the spool size (bytes on disk) from which messages
	// the sink refused for good are set aside in the spool's dead-letter
	// log instead of waiting parked for the next session (docs/ingest.md,
	// "Messages a sink refuses for good"). Default SpoolQuota/2; a disk
	// with less free space than the spool holds sets them aside whatever
	// it is. The simulation sets 1: at once.
	SetAsideAt int64
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registry receives the agent's Prometheus metrics when set.
	Registry prometheus.Registerer

	// segmentBytes overrides the spool's segment size (tests).
	segmentBytes int64
	// IngestBodyIdleTimeout ends an ingest request whose body sends
	// nothing for this long (408). Default defaults.IngestBodyIdleTimeout.
	IngestBodyIdleTimeout time.Duration
	// StallTimeout ends a collector's request that holds
	// defaults.StallBytes (of an OTLP/gRPC message, or a remote-write or
	// OTLP/HTTP body) and received less than that more of it in this
	// time: the OTLP/gRPC connection is closed, the HTTP request answered
	// 503 with Retry-After. Default defaults.StallTimeout.
	StallTimeout time.Duration
	// bodyIdle overrides IngestBodyIdleTimeout (tests).
	bodyIdle time.Duration
	// beforeIngester runs in New between starting the driver and making
	// the ingester (tests: a Welcome that comes first).
	beforeIngester func(*Agent)
}

// spoolSegmentBytes is the size of a spool segment: an eighth of the
// quota, so deleting acknowledged segments frees space in small steps,
// within [1 MiB, 64 MiB], and large enough for the largest message (a
// spool record adds a header and the producers' marks to it). New lowers
// it to an eighth of the room on the spool's disk (fitSegmentToDisk).
func (c *Config) spoolSegmentBytes() int64 {
	if c.segmentBytes > 0 {
		return c.segmentBytes
	}
	seg := min(max(c.SpoolQuota/8, defaults.SpoolSegmentMin), defaults.SpoolSegmentMax)
	if c.SpoolQuota == 0 {
		seg = defaults.SpoolSegmentMax
	}
	return max(seg, 2*int64(c.MaxMessageBytes))
}

// fitSegmentToDisk fixes the spool's segment size at the start: the
// quota's (spoolSegmentBytes), but no more than an eighth of the room on
// the spool's disk (its free space plus the spool's own segments), within
// the same bounds. With the default quota far above a small disk, a single
// segment could fill the disk, and acknowledged records would free nothing
// until it is released whole; with eight, sealed ones go as the sink
// acknowledges them.
func (c *Config) fitSegmentToDisk() {
	if c.segmentBytes > 0 {
		return
	}
	seg := c.spoolSegmentBytes()
	if room, err := spool.DiskRoom(c.SpoolDir); err == nil {
		seg = min(seg, max(room/8, defaults.SpoolSegmentMin, 2*int64(c.MaxMessageBytes)))
	}
	c.segmentBytes = seg
}

// Limits of the protocol (see internal/defaults).
const (
	MaxMessageLimit        = defaults.MaxMessage
	DefaultMaxMessageBytes = defaults.AgentMaxMessage
)

// ProtocolVersion is the version of the Send protocol this agent speaks.
const ProtocolVersion = protocol.Version

// maxAgentIDLen is the longest agent id (Hello.agent_id's limit).
const maxAgentIDLen = defaults.MaxAgentIDLen

// batchOverhead is the most internal/batch framing adds around one record
// (header plus a length prefix).
const batchOverhead = ingest.BatchOverhead

func (c *Config) setDefaults() {
	if c.SinkAddr == "" && c.Dialer != nil {
		c.SinkAddr = "in-process"
	}
	if c.SpoolQuota == 0 {
		c.SpoolQuota = defaults.SpoolQuota
	}
	if c.SpoolSync == (seglog.SyncPolicy{}) {
		c.SpoolSync = seglog.SyncAlways()
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxRecordBytes == 0 {
		c.MaxRecordBytes = c.MaxMessageBytes - batchOverhead
	}
	if c.Linger == 0 {
		c.Linger = defaults.Linger
	}
	if c.Compression == 0 {
		c.Compression = codec.Zstd
		if c.Dictionary != nil {
			c.Compression = codec.ZstdDict
		}
	}
	if c.MinRTO == 0 {
		c.MinRTO = defaults.MinRTO
	}
	if c.ReconnectMin == 0 {
		c.ReconnectMin = defaults.ReconnectMin
	}
	if c.ReconnectMax == 0 {
		c.ReconnectMax = max(defaults.ReconnectMax, c.ReconnectMin)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.SinkAddr == "" && c.Dialer == nil {
		errs = append(errs, errors.New("SinkAddr is required"))
	}
	if c.SpoolDir == "" {
		errs = append(errs, errors.New("SpoolDir is required"))
	}
	if c.Dialer == nil {
		// Before the spool exists: a typo in --sink is an error at once,
		// not a spool made and a sink retried for ever.
		for _, a := range strings.Split(c.SinkAddr, ",") {
			if a = strings.TrimSpace(a); a != "" && !strings.HasPrefix(a, RSocketScheme) {
				if err := grpctransport.CheckAddr(a); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if c.MaxMessageBytes < defaults.MinAgentMaxMessage || c.MaxMessageBytes > MaxMessageLimit {
		errs = append(errs, fmt.Errorf("MaxMessageBytes (--max-message) %s outside 1KiB to 4MiB", defaults.FormatSize(int64(c.MaxMessageBytes))))
	}
	if c.MaxRecordBytes < 1 || c.MaxRecordBytes > c.MaxMessageBytes-batchOverhead {
		errs = append(errs, fmt.Errorf("MaxRecordBytes (--max-record) %s outside 1B to %s (--max-message less %d bytes of framing)", defaults.FormatSize(int64(c.MaxRecordBytes)), defaults.FormatSize(int64(c.MaxMessageBytes-batchOverhead)), batchOverhead))
	}
	if c.Compression == codec.ZstdDict && c.Dictionary == nil {
		errs = append(errs, errors.New("--compression dict needs a Dictionary (--dict FILE, from sluice dict train)"))
	}
	if len(c.AgentID) > maxAgentIDLen || strings.IndexFunc(c.AgentID, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		errs = append(errs, fmt.Errorf("AgentID %q: want at most %d printable bytes without whitespace", c.AgentID, maxAgentIDLen))
	}
	if c.ChangeAgentID && c.AgentID == "" {
		errs = append(errs, errors.New("--change-agent-id needs --agent-id: the id the spool is to take"))
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"SpoolQuota (--spool-quota)", c.SpoolQuota}, {"Linger (--linger)", int64(c.Linger)}, {"SetAsideAt (--dead-letter-at)", c.SetAsideAt}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s is negative", f.name))
		}
	}
	if minQuota := max(defaults.MinSpoolQuota, 4*int64(c.MaxMessageBytes)); c.SpoolQuota > 0 && c.SpoolQuota < minQuota {
		errs = append(errs, fmt.Errorf("SpoolQuota (--spool-quota) %s below %s (at least 2MiB and four --max-message)", defaults.FormatSize(c.SpoolQuota), defaults.FormatSize(minQuota)))
	}
	if len(errs) > 0 {
		return defaults.InvalidConfig("agent", errs)
	}
	return nil
}
