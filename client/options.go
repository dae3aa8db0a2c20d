package client

import (
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Opt is an option every constructor takes: where the sink is, how to
// authenticate, where to log. Options are applied in order; a later one
// overrides an earlier one.
type Opt interface {
	ProducerOpt
	ConsumerOpt
	HTTPOpt
}

// ProducerOpt is an option of NewProducer.
type ProducerOpt interface {
	apply(*cfg)
	producerOpt()
}

// ConsumerOpt is an option of NewConsumer.
type ConsumerOpt interface {
	apply(*cfg)
	consumerOpt()
}

// HTTPOpt is an option of NewHTTPProducer. Of the common options it uses
// TLS, Token, AllowTokenWithoutTLS and Logger; SinkAddrs means nothing to
// it.
type HTTPOpt interface {
	applyHTTP(*httpCfg)
}

type clientOpt struct{ fn func(*cfg) }

func (o clientOpt) apply(c *cfg)         { o.fn(c) }
func (clientOpt) producerOpt()           {}
func (clientOpt) consumerOpt()           {}
func (o clientOpt) applyHTTP(h *httpCfg) { o.fn(&h.cfg) }

type producerOpt struct{ fn func(*cfg) }

func (o producerOpt) apply(c *cfg) { o.fn(c) }
func (producerOpt) producerOpt()   {}

type consumerOpt struct{ fn func(*cfg) }

func (o consumerOpt) apply(c *cfg) { o.fn(c) }
func (consumerOpt) consumerOpt()   {}

type httpOpt struct{ fn func(*httpCfg) }

func (o httpOpt) applyHTTP(h *httpCfg) { o.fn(h) }

// cfg holds every option; each constructor reads the ones it takes.
type cfg struct {
	sinks         []string
	tls           *tls.Config
	token         string
	insecureToken bool
	logger        *slog.Logger

	// Producer.
	spoolDir    string
	agentID     string
	spoolQuota  int64
	compression Codec
	maxMessage  int
	linger      time.Duration
	registerer  prometheus.Registerer

	// Consumer.
	group       string
	from        uint64
	fromSet     bool
	resumeAfter *Record
	follow      bool
	credits     uint32
	onReconnect func(Reconnect)
	onConnect   func(addr string, down time.Duration)
}

// SinkAddrs sets the sink's gRPC address, HOST:PORT (required). With
// several, each (re)connection goes to the next one, so a Producer or a
// following Consumer fails over between sinks that share a store.
func SinkAddrs(addrs ...string) Opt {
	return clientOpt{func(c *cfg) { c.sinks = append([]string(nil), addrs...) }}
}

// TLS makes connections use TLS with this configuration (for mutual TLS,
// set its Certificates). Default: plain text.
func TLS(conf *tls.Config) Opt {
	return clientOpt{func(c *cfg) { c.tls = conf.Clone() }}
}

// Token sends "Authorization: Bearer TOKEN" with every call: to the sink
// (the sink's tokens file names the agent id or "*" for readers) or, for
// an HTTPProducer, to the agent's ingest API. It requires TLS unless
// AllowTokenWithoutTLS is given too. Default: none.
func Token(token string) Opt {
	return clientOpt{func(c *cfg) { c.token = token }}
}

// AllowTokenWithoutTLS lets Token travel in clear text; for loopback tests
// only.
func AllowTokenWithoutTLS() Opt {
	return clientOpt{func(c *cfg) { c.insecureToken = true }}
}

// Logger receives the client's logs (reconnections, the embedded agent's
// delivery). Default: none, the client logs nothing; pass slog.Default()
// to log where the application does.
func Logger(l *slog.Logger) Opt {
	return clientOpt{func(c *cfg) { c.logger = l }}
}

// Codec is how a Producer compresses messages for the wire.
type Codec int

const (
	// Zstd compresses each message with zstd (the default).
	Zstd Codec = iota
	// Plain sends messages as they are: for incompressible records, or a
	// CPU-starved producer on a fast network.
	Plain
)

// SpoolDir is the Producer's spool directory (required): records are
// fsynced there before Produce returns and stay until the sink
// acknowledges them, also across restarts. One process at a time may use
// a spool (it is locked).
func SpoolDir(dir string) ProducerOpt {
	return producerOpt{func(c *cfg) { c.spoolDir = dir }}
}

// AgentID names the Producer to the sink, which deduplicates by agent id
// and message id. Default: the id kept in the spool, or a random
// "agent-…" id on first use. A spool keeps its id for life.
func AgentID(id string) ProducerOpt {
	return producerOpt{func(c *cfg) { c.agentID = id }}
}

// SpoolQuota bounds the spool's size on disk; Produce fails with
// ErrSpoolFull beyond it until the sink catches up. Default 1 GiB; at
// least 2 MiB.
func SpoolQuota(bytes int64) ProducerOpt {
	return producerOpt{func(c *cfg) { c.spoolQuota = bytes }}
}

// Compression sets the wire compression. Default Zstd.
func Compression(k Codec) ProducerOpt {
	return producerOpt{func(c *cfg) { c.compression = k }}
}

// MaxMessageBytes bounds the uncompressed size of one message: records
// are packed until it is reached, and a record must fit in it. Default
// 256 KiB, at most 4 MiB.
func MaxMessageBytes(n int) ProducerOpt {
	return producerOpt{func(c *cfg) { c.maxMessage = n }}
}

// Linger is how long a message waits for more records before it is
// sealed and spooled; Produce waits that long at most for company.
// Default 5ms.
func Linger(d time.Duration) ProducerOpt {
	return producerOpt{func(c *cfg) { c.linger = d }}
}

// Metrics registers the Producer's Prometheus metrics (the agent's
// sluice_agent_* series) with reg. Default: not registered.
func Metrics(reg prometheus.Registerer) ProducerOpt {
	return producerOpt{func(c *cfg) { c.registerer = reg }}
}

// Group makes the Consumer read as consumer group name: it starts at the
// group's committed offset (unless From or ResumeAfter is given) and
// Commit stores its position there. Default: no group.
func Group(name string) ConsumerOpt {
	return consumerOpt{func(c *cfg) { c.group = name }}
}

// From starts the Consumer at this store offset (a message's Offset; with
// a Kafka-backed sink a partition and offset packed as partition<<48 |
// offset). Default 0, the start, or the group's committed offset.
func From(offset uint64) ConsumerOpt {
	return consumerOpt{func(c *cfg) { c.from, c.fromSet, c.resumeAfter = offset, true, nil }}
}

// ResumeAfter starts the Consumer at the record after r, a record an
// earlier Consumer returned and the application stored with its own
// results: with it a reader that keeps its position itself reads every
// record exactly once.
func ResumeAfter(r Record) ConsumerOpt {
	return consumerOpt{func(c *cfg) {
		r.Value = nil
		c.from, c.fromSet, c.resumeAfter = r.Offset, true, &r
	}}
}

// Follow keeps the Consumer reading new records as they are stored,
// reconnecting (to the next SinkAddrs address, with a jittered back-off
// from 100ms to 5s) when the sink goes away. Default false: Next returns
// io.EOF once it has caught up.
func Follow(on bool) ConsumerOpt {
	return consumerOpt{func(c *cfg) { c.follow = on }}
}

// Credits is how many messages the sink may send ahead of what Next has
// returned. Default 256; between 2 and 1<<20.
func Credits(n int) ConsumerOpt {
	return consumerOpt{func(c *cfg) {
		c.credits = uint32(min(max(n, 0), 1<<21))
	}}
}

// OnReconnect is called, instead of logging, each time a following
// Consumer lost its stream and is about to reconnect.
func OnReconnect(fn func(Reconnect)) ConsumerOpt {
	return consumerOpt{func(c *cfg) { c.onReconnect = fn }}
}

// OnReconnected is called, instead of logging, when a following Consumer
// opens a stream again after failures (lost streams, failed dials), with
// how long since the first of them: with OnReconnect, a caller can say
// once that the sink went away and once that it is back.
func OnReconnected(fn func(addr string, down time.Duration)) ConsumerOpt {
	return consumerOpt{func(c *cfg) { c.onConnect = fn }}
}
