package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
)

// Errors of Produce and ProduceIdempotent, to test with errors.Is.
var (
	// ErrRecordTooLarge: a record exceeds MaxMessageBytes (minus framing),
	// or one call exceeds half the spool quota. Nothing of the call is
	// spooled.
	ErrRecordTooLarge = agent.ErrRecordTooLarge
	// ErrSpoolFull: the spool reached SpoolQuota; retry once the sink
	// has caught up (Stats().SpoolBytes falls).
	ErrSpoolFull = agent.ErrSpoolFull
	// ErrNoSpace: the spool's disk is full; nothing of the call is
	// spooled.
	ErrNoSpace = agent.ErrNoSpace
	// ErrClosed: the Producer or Consumer is closed.
	ErrClosed = errors.New("client: closed")
	// ErrBadRequest: arguments the client or the agent cannot use (a
	// sequence number 0, a producer id over 64 bytes, a record with a
	// newline for an HTTPProducer).
	ErrBadRequest = agent.ErrBadRequest
)

// Producer writes records into a local spool and delivers them to the
// sink in the background: it embeds sluice's agent. Safe for concurrent
// use.
type Producer struct {
	a *agent.Agent

	// mu guards closed: Flush reads the agent's spool only while it is
	// open.
	mu     sync.RWMutex
	closed bool
}

// NewProducer opens (or creates) the spool, starts delivering what it
// holds that the sink has not acknowledged, and returns a Producer.
// SinkAddrs and SpoolDir are required.
func NewProducer(opts ...ProducerOpt) (*Producer, error) {
	var c cfg
	for _, o := range opts {
		o.apply(&c)
	}
	ac, err := c.agentConfig()
	if err != nil {
		return nil, err
	}
	a, err := agent.New(ac)
	if err != nil {
		return nil, err
	}
	return &Producer{a: a}, nil
}

func (c *cfg) agentConfig() (agent.Config, error) {
	var errs []error
	if len(c.sinks) == 0 {
		errs = append(errs, errors.New("SinkAddrs is required"))
	}
	for _, s := range c.sinks {
		if s == "" || strings.ContainsAny(s, ", \t") {
			errs = append(errs, fmt.Errorf("sink address %q: want HOST:PORT", s))
		}
	}
	if c.spoolDir == "" {
		errs = append(errs, errors.New("SpoolDir is required"))
	}
	if err := c.checkToken(); err != nil {
		errs = append(errs, err)
	}
	ac := agent.Config{
		SinkAddr:        strings.Join(c.sinks, ","),
		SpoolDir:        c.spoolDir,
		AgentID:         c.agentID,
		SpoolQuota:      c.spoolQuota,
		MaxMessageBytes: c.maxMessage,
		Linger:          c.linger,
		GRPC:            c.transport(),
		Logger:          c.log(),
		Registry:        c.registerer,
	}
	switch c.compression {
	case Zstd:
		ac.Compression = codec.Zstd
	case Plain:
		ac.Compression = codec.Plain
	default:
		errs = append(errs, fmt.Errorf("unknown Compression %d", c.compression))
	}
	if len(errs) > 0 {
		return ac, fmt.Errorf("client: %w", errors.Join(errs...))
	}
	return ac, nil
}

// transport is how the options reach a sink: TLS and the token.
func (c *cfg) transport() grpctransport.ClientOptions {
	return grpctransport.ClientOptions{TLS: c.tls, Token: c.token, AllowTokenWithoutTLS: c.insecureToken}
}

// checkToken refuses a token that would travel in clear text.
func (c *cfg) checkToken() error {
	if c.token != "" && c.tls == nil && !c.insecureToken {
		return errors.New("a Token without TLS would travel in clear text: add TLS, or AllowTokenWithoutTLS for loopback tests")
	}
	return nil
}

func (c *cfg) log() *slog.Logger {
	if c.logger != nil {
		return c.logger
	}
	// A library is quiet unless given a logger (issue 24: the embedded
	// agent's INFO lines went to the application's stderr).
	return quietLogger
}

var quietLogger = slog.New(slog.DiscardHandler)

// Produce returns once every record is durably in the spool (fsynced);
// the sink gets them later, in order, and exactly once per spooled
// record. On error none or only some records may be spooled, and
// retrying may duplicate those: ProduceIdempotent makes retries exact.
// ctx bounds the wait for room in the pipeline, not the fsync.
func (p *Producer) Produce(ctx context.Context, records ...[]byte) error {
	_, err := p.ProduceIdempotent(ctx, "", 0, records...)
	return err
}

// ProduceIdempotent is Produce for a producer that numbers its calls:
// producerID (at most 64 bytes) names one producer run, and seq starts at
// 1 and grows with every new call. A call whose seq is not above the
// newest completed one is a retry: it returns duplicate=true and spools
// nothing, also after a crash of this process (the spool remembers), so a
// retried call ends up in the sink exactly once. A retry of a call that
// was cut short spools only what is missing. An empty producerID is
// Produce.
func (p *Producer) ProduceIdempotent(ctx context.Context, producerID string, seq uint64, records ...[]byte) (duplicate bool, err error) {
	// The agent refuses calls once closed; no lock is held across the
	// fsync, so Close never waits for a stuck call.
	if p.isClosed() {
		return false, ErrClosed
	}
	dup, err := p.a.IngestFrom(ctx, producerID, seq, records)
	if errors.Is(err, agent.ErrClosed) {
		err = ErrClosed
	}
	return dup, err
}

// flushPoll is how often Flush looks at the acknowledged watermark (acks
// come in batches and are persisted every 100ms; polling keeps the agent
// free of per-caller notification).
const flushPoll = 5 * time.Millisecond

// Flush waits until everything spooled before the call is acknowledged
// by the sink, that is durably stored there, or ctx ends. It does not
// stop other goroutines from producing meanwhile.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return ErrClosed
	}
	target := p.a.SpoolNext()
	p.mu.RUnlock()
	t := time.NewTicker(flushPoll)
	defer t.Stop()
	for {
		p.mu.RLock()
		closed := p.closed
		var acked uint64
		if !closed {
			acked = p.a.AckedWatermark()
		}
		p.mu.RUnlock()
		switch {
		case closed:
			return ErrClosed
		case acked >= target:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("client: flush: %d messages not yet acknowledged by the sink: %w", target-acked, ctx.Err())
		case <-t.C:
		}
	}
}

func (p *Producer) isClosed() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.closed
}

// ProducerStats is a snapshot of a Producer's counters since it started.
type ProducerStats struct {
	ProducedRecords, ProducedBytes uint64 // accepted by Produce (spooled)
	SpooledMessages                uint64
	AckedMessages, AckedRecords    uint64 // acknowledged by the sink
	Resent                         uint64 // messages sent again (timeouts, reconnects)
	Unacked                        int    // messages in the spool not yet acknowledged
	SpoolBytes                     int64
	// Connected: a stream to a sink is established.
	Connected bool
}

// Stats returns the Producer's counters.
func (p *Producer) Stats() ProducerStats {
	st := p.a.Progress()
	return ProducerStats{
		ProducedRecords: st.IngestedRecords, ProducedBytes: st.IngestedBytes,
		SpooledMessages: st.SpooledMessages, AckedMessages: st.AckedMessages, AckedRecords: st.AckedRecords,
		Resent: st.Resent, Unacked: st.Unacked, SpoolBytes: st.SpoolBytes,
		Connected: st.State != "" && st.State != "Disconnected",
	}
}

// ID is the Producer's agent id, as the sink sees it.
func (p *Producer) ID() string { return p.a.ID() }

// Handler serves the agent's ingest API (POST /v1/records, see
// HTTPProducer) into this Producer, for processes that accept records
// from others.
func (p *Producer) Handler() http.Handler { return p.a.Handler() }

// Close stops the Producer: records already spooled and not yet
// acknowledged stay in the spool and are delivered by the next Producer
// (or agent) on the same SpoolDir. Call Flush first to have them in the
// sink now. Calls after Close fail with ErrClosed.
func (p *Producer) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	return p.a.Close()
}
