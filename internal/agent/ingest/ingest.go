// Package ingest is how records enter the agent: the HTTP ingest API
// and the Go calls behind it, the producers' idempotency (a retried
// request is recognised by its producer id and sequence), the spool
// quota, and the pipeline that packs records into messages (the
// batcher), compresses them (one worker per CPU by default,
// Config.CompressWorkers) and appends them to the spool in order (the
// spool writer, one fdatasync per group). An ingest call returns once
// its records are durable. What is spooled is announced on Spooled for
// the driver. When the sink asks for it (SetSealKafka) a zstd agent seals
// its messages as Kafka records sections instead of batches (kafka.go).
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/agent/metrics"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
)

// Errors of an ingest call, to test with errors.Is (with spool.ErrFull
// and spool.ErrNoSpace).
var (
	// ErrRecordTooLarge: a record exceeds Config.MaxRecordBytes.
	ErrRecordTooLarge = errors.New("agent: record too large")
	// ErrClosed: the agent is shutting down.
	ErrClosed = errors.New("agent: closed")
	// ErrBadRequest: an ingest call the agent cannot make sense of.
	ErrBadRequest = errors.New("agent: bad request")
)

// BatchOverhead is the most internal/batch framing adds around one record
// (header plus a length prefix).
const BatchOverhead = 16

// Config is what ingest needs of the agent's configuration, defaults
// applied.
type Config struct {
	MaxMessageBytes, MaxRecordBytes int
	Linger                          time.Duration
	Compression                     codec.Kind
	Level                           codec.Level
	Dictionary                      *codec.Dictionary
	// CompressWorkers is how many messages are compressed at once, each
	// with its own encoder (0: GOMAXPROCS, one per core). Messages are
	// spooled in the order they were sealed however many there are.
	CompressWorkers int
	SpoolQuota      int64
	// Tokens, when set, are required by the HTTP API.
	Tokens *auth.Tokens
	// BodyIdleTimeout ends a request whose body sends nothing for this
	// long (default defaults.IngestBodyIdleTimeout).
	BodyIdleTimeout time.Duration
	Logger          *slog.Logger
	// Now is the agent's clock (spool.Spooled.At).
	Now func() int64
	// OnSpooled is told, in id order and in the spool writer's goroutine,
	// of every message spooled; it takes the records (spool.Spooled.Rec).
	// Required.
	OnSpooled func([]spool.Spooled)
	// SinkDown, when set, says why the agent has no session with a sink
	// (nil: it has one); a 200 carries it in HeaderSinkDown, so that a
	// producer can tell that its records wait in the spool.
	SinkDown func() error
}

// Ingester accepts records into the spool. Create it with New, stop it
// with Close.
type Ingester struct {
	cfg     Config
	log     *slog.Logger
	spool   *spool.Spool
	metrics *metrics.Metrics
	spoolM  *spool.Metrics

	bt *batcher
	wg sync.WaitGroup
	// encs holds one encoder per compression worker (CompressWorkers),
	// each holding the dictionary; a compression takes one, so at most
	// that many run at once, in the workers or in ingest callers.
	encs *encoderStack

	// agentID is the spool's agent id: the key of every record of a
	// message sealed as a Kafka records section (see kafka.go).
	agentID []byte
	// sealKafka: new messages are sealed as Kafka records sections
	// (SetSealKafka).
	sealKafka atomic.Bool
	// reenc and reencoded are the spool writer's: what re-encodes a
	// Kafka message whose predicted id was wrong, and how many it did.
	reenc     *reencoder
	reencoded atomic.Int64
	// beforeAppend, when set (tests only), runs in the spool writer with
	// each group of messages before it is appended.
	beforeAppend func(group int)

	prodMu    sync.Mutex
	prodLocks map[string]*producerLock

	// AfterAnswer, when set (tests only, before the first call), runs in
	// the spool writer after it has answered the ingest calls of a
	// message.
	AfterAnswer func()

	mu     sync.RWMutex // held for reading by ingest calls, for writing by Close
	closed bool
}

// pipelineDepth is how many sealed messages may wait for compression and
// for the spool; with the default 256 KiB messages, at most 64 MiB.
const pipelineDepth = 256

// New starts the pipeline into sp.
func New(cfg Config, sp *spool.Spool, m *metrics.Metrics, sm *spool.Metrics) (*Ingester, error) {
	// One encoder per compression worker, each holding the dictionary.
	workers := cfg.CompressWorkers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	encs := newEncoderStack(workers)
	for range workers {
		enc := &encoder{Encoder: codec.NewEncoder(cfg.Level)}
		if cfg.Dictionary != nil {
			if err := enc.AddDictionary(*cfg.Dictionary); err != nil {
				return nil, err
			}
		}
		encs.put(enc)
	}
	if cfg.BodyIdleTimeout <= 0 {
		cfg.BodyIdleTimeout = defaults.IngestBodyIdleTimeout
	}
	g := &Ingester{cfg: cfg, log: cfg.Logger, spool: sp, metrics: m, spoolM: sm,
		prodLocks: map[string]*producerLock{}, encs: encs, agentID: []byte(sp.ID())}
	// Deep enough that compression keeps going while the spool writer
	// waits for an fsync: with a few slots the workers stall every fsync
	// and ingest tops out at a few messages per fsync.
	sealed := make(chan *sealedMsg, pipelineDepth)
	work := make(chan *sealedMsg, pipelineDepth)
	g.bt = newBatcher(&g.cfg, work, sealed, g.compress)
	if kafkaCapable(cfg.Compression, g.agentID) {
		g.bt.kafka, g.bt.agentID = &g.sealKafka, g.agentID
	}
	// The spool writer is the log's only appender: the next message
	// sealed gets its next offset (see kafka.go).
	g.bt.nextID.Store(sp.Log().NextOffset())
	g.wg.Add(1 + workers)
	go func() { defer g.wg.Done(); g.spoolWriter(sealed) }()
	for range workers {
		go func() { defer g.wg.Done(); g.compressor(work) }()
	}
	return g, nil
}

// SetSealKafka says whether messages sealed from now on are Kafka records
// sections (codec.KafkaZstd), what the sink asked for in its Welcome. It
// changes nothing unless the agent compresses with plain zstd: a plain or
// dictionary agent keeps its kind. Messages already sealed keep theirs. A
// message takes the setting in force when its first record was added.
func (g *Ingester) SetSealKafka(on bool) { g.sealKafka.Store(on) }

// SealsKafka reports whether new messages are sealed as Kafka records
// sections: the sink asked (SetSealKafka) and this agent can (zstd
// without a dictionary, an id a record key takes).
func (g *Ingester) SealsKafka() bool { return g.bt.kafka != nil && g.sealKafka.Load() }

// Close stops accepting records, spools what was accepted and answers
// every call in progress.
func (g *Ingester) Close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	g.mu.Unlock()
	g.bt.close()
	g.wg.Wait()
}

// IngestFrom accepts records and returns once they are durably in the
// spool (under the configured SpoolSync). With an empty producer, on error
// none or only some of the records may be spooled, and a retry can
// duplicate them. A producer that numbers its requests makes retries
// exact: seq must grow with every new request of producer (an id of at
// most 64 bytes, unique per producer run). A request whose seq is not
// above the newest completed one is a retry of a request already spooled:
// it is answered with duplicate=true and spooled again never, also across
// agent crashes, because the completion mark is stored in the spool with
// the request's last record.
func (g *Ingester) IngestFrom(ctx context.Context, producer string, seq uint64, records [][]byte) (duplicate bool, err error) {
	if len(producer) > spool.MaxProducerIDLen {
		return false, fmt.Errorf("%w: producer id over %d bytes", ErrBadRequest, spool.MaxProducerIDLen)
	}
	if producer != "" && seq == 0 {
		return false, fmt.Errorf("%w: sequence numbers start at 1", ErrBadRequest)
	}
	for i, r := range records {
		if len(r) > g.cfg.MaxRecordBytes {
			return false, fmt.Errorf("%w: record %d has %d bytes, limit %d", ErrRecordTooLarge, i, len(r), g.cfg.MaxRecordBytes)
		}
	}
	if len(records) == 0 {
		return false, nil
	}
	m := spool.Mark{Producer: producer, Seq: seq}
	if producer != "" {
		// One request per producer at a time, so a retry that arrives while
		// the original is still being spooled waits for it and then sees
		// how far it got.
		unlock := g.lockProducer(producer)
		defer unlock()
		switch p := g.spool.ProgressOf(producer); {
		case seq < p.Seq || (seq == p.Seq && p.Complete):
			g.metrics.Duplicates.Inc()
			return true, nil
		case seq == p.Seq:
			// A retry of a request that was cut short by a crash: spool
			// only the records that are missing.
			if int(p.Done) > len(records) {
				return false, fmt.Errorf("%w: retry of request %d has %d records, %d were already spooled", ErrBadRequest, seq, len(records), p.Done)
			}
			records, m.Done = records[p.Done:], p.Done
			g.metrics.Duplicates.Inc()
		}
	}
	return false, g.ingest(ctx, ingestReq{records: records, mark: m})
}

// ingest reserves quota, hands req to the batcher and waits for the spool.
func (g *Ingester) ingest(ctx context.Context, req ingestReq) error {
	for _, r := range req.records {
		req.bytes += int64(len(r)) + 4
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return ErrClosed
	}
	if q := g.cfg.SpoolQuota; q > 0 && req.bytes > q/2 {
		// It could never fit beside the spool's other contents.
		return fmt.Errorf("%w: request of %d bytes is over half the spool quota (%d); send smaller requests or raise the quota", ErrRecordTooLarge, req.bytes, q)
	}
	if !g.spool.Reserve(req.bytes) {
		g.metrics.SpoolFull.Inc()
		return fmt.Errorf("%w (%d bytes on disk, quota %d)", spool.ErrFull, g.spool.Size(), g.cfg.SpoolQuota)
	}
	req.done = make(chan error, 1)
	// The batcher's lock is held only while records are added and, when
	// the pipeline is full, while a sealed message waits for room: that
	// wait is what ctx bounds.
	if err := g.bt.lock(ctx); err != nil {
		g.spool.Release(req.bytes)
		return err
	}
	g.bt.add(req)
	g.bt.unlock()
	// Wait even if ctx ends: a producer's lock must be held until the
	// outcome is known, or a retry could race the original.
	err := <-req.done
	if err == nil {
		g.metrics.Ingested(len(req.records), req.bytes)
	}
	return err
}

// IngestMessage spools records as exactly one message, sealed at once,
// for callers that batch by themselves (a collector with its own
// partitioning, or a benchmark reproducing a message-size distribution).
// The packed records must fit MaxMessageBytes.
func (g *Ingester) IngestMessage(ctx context.Context, records [][]byte) error {
	if size := batch.Size(records); size > g.cfg.MaxMessageBytes || len(records) > batch.MaxRecords {
		return fmt.Errorf("%w: message of %d bytes and %d records, limit %d bytes", ErrRecordTooLarge, size, len(records), g.cfg.MaxMessageBytes)
	}
	return g.ingest(ctx, ingestReq{records: records, whole: true})
}

// lockProducer serialises requests of one producer.
func (g *Ingester) lockProducer(p string) (unlock func()) {
	g.prodMu.Lock()
	l, ok := g.prodLocks[p]
	if !ok {
		l = &producerLock{}
		g.prodLocks[p] = l
	}
	l.refs++
	g.prodMu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		g.prodMu.Lock()
		if l.refs--; l.refs == 0 {
			delete(g.prodLocks, p)
		}
		g.prodMu.Unlock()
	}
}

type producerLock struct {
	sync.Mutex
	refs int
}
