package agent

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/agent/collect"
	"github.com/sluicehq/sluice/internal/agent/driver"
	"github.com/sluicehq/sluice/internal/agent/ingest"
	"github.com/sluicehq/sluice/internal/agent/metrics"
	"github.com/sluicehq/sluice/internal/agent/spool"

	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/delivery"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/seglog"
)

var (
	// ErrRecordTooLarge: a record exceeds Config.MaxRecordBytes.
	ErrRecordTooLarge = ingest.ErrRecordTooLarge
	// ErrSpoolFull: the spool reached Config.SpoolQuota; retry once the
	// sink has caught up.
	ErrSpoolFull = spool.ErrFull
	// ErrNoSpace: the spool's disk is full (ENOSPC or EDQUOT); nothing of
	// the failed call is spooled, and appends succeed again once space is
	// freed (acknowledged segments are deleted as acks arrive).
	ErrNoSpace = spool.ErrNoSpace
	// ErrClosed: the agent is shutting down.
	ErrClosed = ingest.ErrClosed
	// ErrBadRequest: an ingest call the agent cannot make sense of.
	ErrBadRequest = ingest.ErrBadRequest
)

// Agent is a running edge agent. Create it with New; stop it with Close.
type Agent struct {
	cfg   Config
	log   *slog.Logger
	spool *spool.Spool
	// One dialer per sink address; a (re)connection uses the next one, so
	// an agent fails over across sinks (see Config.SinkAddr). closers are
	// the transport connections behind them.
	dialers []protocol.Dialer
	addrs   []string
	closers []io.Closer
	metrics *metrics.Metrics
	spoolM  *spool.Metrics
	driver  *driver.Driver
	ingest  *ingest.Ingester
	collect *collect.Receiver
	origin  time.Time

	ctx    context.Context
	cancel context.CancelFunc

	// sealMu guards what the sink asked for last (sealKafka, told by the
	// driver at each Welcome) and the ingester it goes to (sealTo, set
	// once it exists): the driver dials before the ingester is made, and
	// a Welcome may come first.
	sealMu    sync.Mutex
	sealKafka bool
	sealTo    *ingest.Ingester

	closeOnce sync.Once
}

// setSealKafka passes the sink's ask for Kafka records sections (see
// driver.Config.SealKafka) to the ingester, or keeps it for the ingester
// not made yet.
func (a *Agent) setSealKafka(on bool) {
	a.sealMu.Lock()
	defer a.sealMu.Unlock()
	a.sealKafka = on
	if a.sealTo != nil {
		a.sealTo.SetSealKafka(on)
		a.showSealKafka()
	}
}

// showSealKafka sets the gauge of what the ingester does now; the caller
// holds sealMu.
func (a *Agent) showSealKafka() {
	v := 0.0
	if a.sealTo.SealsKafka() {
		v = 1
	}
	a.metrics.SealKafkaRecords.Set(v)
}

// New opens the spool, resumes delivery of everything not yet
// acknowledged, and starts the agent.
func New(cfg Config) (*Agent, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.fitSegmentToDisk()
	m := metrics.New(cfg.Registry)
	sm := spool.NewMetrics(cfg.Registry)
	open := spool.Open
	if cfg.ChangeAgentID {
		open = spool.OpenChangingID
	}
	sp, err := open(cfg.SpoolDir, cfg.SpoolQuota, cfg.AgentID, cfg.Logger,
		seglog.WithSegmentBytes(cfg.spoolSegmentBytes()),
		seglog.WithSync(cfg.SpoolSync),
		seglog.WithOffsetReservation(defaults.SpoolIDReservation),
		seglog.WithMaxRecordBytes(MaxMessageLimit+1024),
		seglog.WithLogger(cfg.Logger),
		seglog.WithSyncObserver(func(d time.Duration) { m.Fsync.Observe(d.Seconds()) }))
	if err != nil {
		return nil, err
	}
	sp.SetPressedAt(cfg.SetAsideAt)
	sender, err := delivery.NewSender(delivery.SenderConfig{
		Watermark:        sp.AckedWatermark(),
		MaxInFlightMsgs:  cfg.MaxInFlightMsgs,
		MaxInFlightBytes: cfg.MaxInFlightBytes,
		MinRTO:           cfg.MinRTO,
		InitialRTO:       max(cfg.MinRTO, time.Second),
		ReconnectMin:     cfg.ReconnectMin,
		ReconnectMax:     cfg.ReconnectMax,
		ProgressTimeout:  orDefault(cfg.ProgressTimeout, DefaultProgressTimeout),
	})
	if err != nil {
		sp.Close()
		return nil, err
	}
	dialers, addrs, closers, err := sinkDialers(cfg)
	if err != nil {
		sp.Close()
		return nil, err
	}
	closeAll := func() {
		for _, c := range closers {
			c.Close()
		}
	}
	for _, w := range sp.Warnings() {
		cfg.Logger.Warn("agent: spool: "+w, "spool", cfg.SpoolDir)
	}
	backlog, lost, err := readBacklog(sp)
	if err != nil {
		closeAll()
		sp.Close()
		return nil, err
	}
	if len(lost) > 0 {
		missing, skipped := splitSkipped(lost, sp.Log())
		for _, r := range missing {
			sm.Lost.Add(float64(r.Last - r.First + 1))
		}
		if len(missing) > 0 {
			cfg.Logger.Error("agent: unacknowledged messages are missing from the spool (quarantined by a repair); the rest is delivered",
				"spool", cfg.SpoolDir, "missing", fmt.Sprint(missing))
		}
		if skipped.Last >= skipped.First {
			cfg.Logger.Warn("agent: message ids reserved by the last run are skipped, so that none the sink may hold is given again "+
				"(the last run did not stop cleanly; after a machine crash with --spool-sync interval or none, "+
				"the messages it had not yet fsynced are lost)",
				"spool", cfg.SpoolDir, "first_id", skipped.First, "last_id", skipped.Last)
		}
		if backlog, err = skipLost(sender, sp.Acknowledge, backlog, lost); err != nil {
			closeAll()
			sp.Close()
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Agent{
		cfg: cfg, log: cfg.Logger.With("agent", sp.ID()), spool: sp, dialers: dialers, addrs: addrs, closers: closers,
		metrics: m, spoolM: sm, origin: time.Now(), ctx: ctx, cancel: cancel,
	}
	m.SpoolBytes = sp.Size
	m.DeadLetterMessages = sp.DeadLetters
	m.Now = a.now
	for i := range backlog {
		backlog[i].At = a.now()
	}
	// The driver first: the spool writer tells it of every message
	// spooled (ingest.Config.OnSpooled).
	a.driver = driver.Start(ctx, driver.Config{
		Dialers: dialers, Addrs: addrs, Dictionary: cfg.Dictionary, Compression: cfg.Compression,
		MaxMessageBytes: cfg.MaxMessageBytes, HandshakeTimeout: orDefault(cfg.HandshakeTimeout, DefaultHandshakeTimeout),
		Logger: a.log, Now: a.now, SealKafka: a.setSealKafka,
	}, sender, sp, m, backlog)
	if cfg.beforeIngester != nil {
		cfg.beforeIngester(a)
	}
	a.ingest, err = ingest.New(ingest.Config{
		MaxMessageBytes: cfg.MaxMessageBytes, MaxRecordBytes: cfg.MaxRecordBytes, Linger: cfg.Linger,
		Compression: cfg.Compression, Level: cfg.CompressionLevel, Dictionary: cfg.Dictionary, SpoolQuota: cfg.SpoolQuota,
		Tokens: cfg.IngestTokens, Logger: a.log, Now: a.now, OnSpooled: a.driver.Spooled, BodyIdleTimeout: cmp.Or(cfg.bodyIdle, cfg.IngestBodyIdleTimeout),
		SinkDown: a.driver.Ready,
	}, sp, m, sm)
	if err != nil {
		cancel()
		<-a.driver.Done()
		closeAll()
		sp.Close()
		return nil, err
	}
	a.sealMu.Lock()
	a.sealTo = a.ingest
	a.ingest.SetSealKafka(a.sealKafka)
	a.showSealKafka()
	a.sealMu.Unlock()
	a.collect = collect.New(collect.Config{Ingest: a.Ingest, MaxRecordBytes: cfg.MaxRecordBytes, Tokens: cfg.IngestTokens,
		BodyIdleTimeout: cmp.Or(cfg.bodyIdle, cfg.IngestBodyIdleTimeout), Logger: a.log, Registry: cfg.Registry, StallTimeout: cfg.StallTimeout})
	a.log.Info("agent started", "agent_id", sp.ID(), "sink", cfg.SinkAddr, "spool", cfg.SpoolDir,
		"resuming_messages", len(backlog), "watermark", sp.AckedWatermark(), "spool_segment_bytes", cfg.segmentBytes)
	return a, nil
}

// readBacklog lists the spooled messages not yet acknowledged, with their
// wire sizes, so the Sender can resend them, and the ids missing among
// them: a repair of a damaged spool keeps the records after the damage at
// their offsets, so the log may have holes.
func readBacklog(sp *spool.Spool) ([]spool.Spooled, []delivery.Range, error) {
	var out []spool.Spooled
	var lost []delivery.Range
	expect := sp.AckedWatermark()
	it := sp.Log().NewIterator(expect, 4<<20)
	for it.Next() {
		id := it.Offset()
		if id > expect {
			lost = append(lost, delivery.Range{First: expect, Last: id - 1})
		}
		expect = id + 1
		m, err := spool.Decode(it.Value())
		if err != nil {
			return nil, nil, fmt.Errorf("agent: spool message %d: %w", id, err)
		}
		out = append(out, spool.Spooled{ID: id, Size: int64(len(m.Body)), Records: int(m.Records)})
		sp.Completed(m.Marks)
	}
	if err := it.Err(); err != nil {
		return nil, nil, fmt.Errorf("agent: read spool: %w", err)
	}
	if next := sp.Log().NextOffset(); expect < next {
		// Missing at the end: a damaged final message the log
		// quarantined keeps its id (a gap), and no record follows it.
		lost = append(lost, delivery.Range{First: expect, Last: next - 1})
	}
	return out, lost, nil
}

// splitSkipped parts the holes readBacklog found into those of lost
// messages and the ids the log skipped at open because an earlier run
// reserved them (seglog.Log.SkippedAtOpen): those are ids never used, or
// used by messages lost with the unsynced tail of a machine crash, which
// nothing can count. The skip is the log's end, so it is the end of the
// last hole.
func splitSkipped(lost []delivery.Range, l *seglog.Log) (missing []delivery.Range, skipped delivery.Range) {
	from, to := l.SkippedAtOpen()
	skipped = delivery.Range{First: 1, Last: 0} // empty
	if from == to {
		return lost, skipped
	}
	for _, r := range lost {
		switch {
		case r.Last < from:
			missing = append(missing, r)
		case r.First >= from:
			skipped = delivery.Range{First: r.First, Last: r.Last}
		default:
			missing = append(missing, delivery.Range{First: r.First, Last: from - 1})
			skipped = delivery.Range{First: from, Last: r.Last}
		}
	}
	return missing, skipped
}

// skipLost settles the missing ids in the Sender, which wants every id
// from its watermark: the messages up to the last hole are fed to it here,
// the holes as acknowledged (nothing can send them), and the rest of the
// backlog is returned for the loop. The watermark this moves to is
// persisted, so the holes are reported once.
func skipLost(s *delivery.Sender, acknowledge func(uint64) error, backlog []spool.Spooled, lost []delivery.Range) ([]spool.Spooled, error) {
	last := lost[len(lost)-1].Last
	step := func(ev delivery.Event) error {
		if err := s.Step(ev); err != nil {
			return fmt.Errorf("agent: skip missing spool messages: %w", err)
		}
		for _, act := range s.Ready() {
			if act.Kind == delivery.ActionMarkAcked {
				if err := acknowledge(act.Watermark); err != nil {
					return err
				}
			}
		}
		s.Advance()
		return nil
	}
	i := 0
	for id := s.Watermark(); id <= last; id++ {
		size := int64(0)
		if i < len(backlog) && backlog[i].ID == id {
			size = backlog[i].Size
			i++
		}
		if err := step(delivery.Spooled(id, size, 0)); err != nil {
			return nil, err
		}
	}
	if err := step(delivery.Acked(lost, 0)); err != nil {
		return nil, err
	}
	return backlog[i:], nil
}

func (a *Agent) now() int64 { return int64(time.Since(a.origin)) }

// ID is the agent's stable id, kept in the spool directory.
func (a *Agent) ID() string { return a.spool.ID() }

// Ingest accepts records and returns once they are durably in the spool
// (under the configured SpoolSync). On error none or only some of the
// records may be spooled, and a retry can duplicate them; IngestFrom makes
// retries exact.
func (a *Agent) Ingest(ctx context.Context, records [][]byte) error {
	_, err := a.ingest.IngestFrom(ctx, "", 0, records)
	return err
}

// IngestFrom is Ingest for a producer that numbers its requests: seq must
// grow with every new request of producer (an id of at most 64 bytes,
// unique per producer run). A request whose seq is not above the newest
// completed one is a retry of a request already spooled: it is answered
// with duplicate=true and spooled again never, also across agent crashes,
// because the completion mark is stored in the spool with the request's
// last record. An empty producer disables this.
func (a *Agent) IngestFrom(ctx context.Context, producer string, seq uint64, records [][]byte) (duplicate bool, err error) {
	return a.ingest.IngestFrom(ctx, producer, seq, records)
}

// IngestMessage spools records as exactly one message, sealed at once,
// for callers that batch by themselves (a collector with its own
// partitioning, or a benchmark reproducing a message-size distribution).
// The packed records must fit MaxMessageBytes.
func (a *Agent) IngestMessage(ctx context.Context, records [][]byte) error {
	return a.ingest.IngestMessage(ctx, records)
}

// Handler serves the ingest API: POST /v1/records (see
// ingest.Ingester.Handler), Prometheus remote-write on /api/v1/write and
// OTLP/HTTP on /v1/metrics, /v1/logs and /v1/traces (see
// internal/agent/collect and docs/ingest.md).
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/records", a.ingest.Handler())
	a.collect.Register(mux)
	return mux
}

// Headers that make ingest retries idempotent (see Agent.IngestFrom).
const (
	HeaderProducer = ingest.HeaderProducer
	HeaderSequence = ingest.HeaderSequence
)

// MaxRequestBytes bounds one ingest HTTP request body.
const MaxRequestBytes = ingest.MaxRequestBytes

// Close stops accepting records, spools what was accepted, stops delivery
// (unacknowledged messages stay in the spool for the next start) and closes
// the spool.
func (a *Agent) Close() error {
	var err error
	a.closeOnce.Do(func() {
		a.ingest.Close()
		a.cancel()
		<-a.driver.Done()
		for _, c := range a.closers {
			c.Close()
		}
		err = a.spool.Close()
	})
	return err
}

// Stats is a snapshot of the agent's counters.
type Stats = metrics.Stats

// Stats is a snapshot of the agent's counters and ack latency quantiles.
func (a *Agent) Stats() Stats { return a.metrics.Snapshot(true) }

// LastError is the newest sink connection failure in words and when it
// happened ("" before any); it is kept after the agent reconnected.
func (a *Agent) LastError() (string, time.Time) {
	st := a.metrics.Snapshot(false)
	return st.LastError, st.LastErrorAt
}

// Progress is Stats without the latency quantiles, cheap enough to poll
// every few milliseconds.
func (a *Agent) Progress() Stats { return a.metrics.Snapshot(false) }

// SpoolWritable is nil when the spool accepts appends, and otherwise says
// why not: the disk is full (ErrNoSpace; nil again once there is room),
// the quota is reached (ErrSpoolFull; nil again once acknowledged messages
// are deleted), or an fdatasync failed (only a restart recovers). It is
// meant for a readiness probe.
func (a *Agent) SpoolWritable() error {
	return a.spool.Writable(int64(a.cfg.MaxMessageBytes))
}
