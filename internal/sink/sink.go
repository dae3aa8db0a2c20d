package sink

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/storedmsg"
	"github.com/sluicehq/sluice/seglog"
)

// Sink is the gRPC server that agents deliver to and consumers read from.
// Create it with New, run it with Serve, stop it with Close.
type Sink struct {
	cfg    Config
	log    *slog.Logger
	m      *metrics
	store  *seglog.Log
	dicts  *dictStore
	groups *groupStore
	srv    *grpc.Server

	// writeCh feeds the storage writer; closed by Close once no stream
	// handler is left.
	writeCh    chan writeItem
	writerDone chan struct{}
	w          *writer

	// closing is closed when Close begins.
	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error

	sessions atomic.Uint64
	started  time.Time
}

// New opens (or creates) the sink's data directory, recovers the store and
// rebuilds the dedup index from the last checkpoint, and starts the storage
// writer. It does not listen: call Serve.
func New(cfg Config) (*Sink, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	for _, d := range []string{"store", "dicts", "groups"} {
		if err := mkdirDurable(filepath.Join(cfg.DataDir, d)); err != nil {
			return nil, fmt.Errorf("sink: create data directory: %w", err)
		}
	}
	m := newMetrics(cfg.Registry)
	opts := []seglog.Option{
		seglog.WithSync(seglog.SyncAlways()),
		seglog.WithLogger(log),
		seglog.WithMaxRecordBytes(int(cfg.MaxMessageBytes) + storedmsg.HeaderSize + maxAgentID),
		seglog.WithSyncObserver(func(d time.Duration) { m.fsync.Observe(d.Seconds()) }),
	}
	if cfg.SegmentBytes > 0 {
		opts = append(opts, seglog.WithSegmentBytes(cfg.SegmentBytes))
	}
	storeDir := filepath.Join(cfg.DataDir, "store")
	store, err := seglog.Open(storeDir, opts...)
	if err != nil {
		return nil, fmt.Errorf("sink: open store: %w", err)
	}
	s := &Sink{
		cfg:        cfg,
		log:        log,
		m:          m,
		store:      store,
		dicts:      newDictStore(filepath.Join(cfg.DataDir, "dicts")),
		groups:     &groupStore{dir: filepath.Join(cfg.DataDir, "groups")},
		writeCh:    make(chan writeItem, 4096),
		writerDone: make(chan struct{}),
		closing:    make(chan struct{}),
		started:    time.Now(),
	}
	start := time.Now()
	dedup, scanned, err := s.loadDedup()
	if err != nil {
		store.Close()
		return nil, err
	}
	log.Info("sink: store open", "dir", storeDir, "first", store.FirstOffset(), "next", store.NextOffset(),
		"agents", len(dedup.agents), "scanned", scanned, "took", time.Since(start).Round(time.Millisecond))
	base := storeSize(storeDir)
	cfg.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "sink", Name: "store_bytes",
			Help: "Size of the store's segment files."}, func() float64 { return float64(base + store.Stats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "sink", Name: "store_next_offset",
			Help: "Offset the next stored message gets."}, func() float64 { return float64(store.NextOffset()) }),
	)
	s.w = newWriter(s, dedup)
	go s.w.run()

	sopts := []grpc.ServerOption{
		// HTTP/2 flow control caps a stream at window ÷ RTT: gRPC's
		// default 64 KiB would cap a 150 ms link at 430 KB/s, and even its
		// dynamic (BDP) window stops at 16 MiB, 110 MB/s at 150 ms. The
		// stream window is at least the default byte credit, so credits,
		// not HTTP/2, bound what is in flight.
		grpc.InitialWindowSize(HTTP2WindowBytes),
		grpc.InitialConnWindowSize(2 * HTTP2WindowBytes),
		grpc.MaxRecvMsgSize(int(cfg.MaxMessageBytes) + 64<<10 + (2 << 20)), // + envelope + dictionary uploads
		grpc.MaxSendMsgSize(MaxMessageBytesLimit + (1 << 20)),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.WaitForHandlers(true),
	}
	if cfg.TLS != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	if cfg.Tokens != nil {
		sopts = append(sopts, grpc.ChainStreamInterceptor(cfg.Tokens.StreamInterceptor()),
			grpc.ChainUnaryInterceptor(cfg.Tokens.UnaryInterceptor()))
	}
	s.srv = grpc.NewServer(sopts...)
	sluicev1.RegisterSinkServer(s.srv, &service{s: s})
	return s, nil
}

// Registry returns the registry holding the sink's metrics
// (Config.Registry, or the sink's own).
func (s *Sink) Registry() *prometheus.Registry { return s.cfg.Registry }

// Store returns the sink's store, for tests and tools that read it
// directly. Appending to it is reserved to the sink.
func (s *Sink) Store() *seglog.Log { return s.store }

// Serve accepts connections on lis until Close. It returns nil after Close.
func (s *Sink) Serve(lis net.Listener) error {
	select {
	case <-s.closing:
		lis.Close()
		return nil
	default:
	}
	err := s.srv.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Close shuts the sink down gracefully: it stops accepting connections and
// streams, lets every Send stream get what it queued stored and acked
// (within ShutdownTimeout), stores everything handed to the storage
// writer, writes a dedup checkpoint and closes the store. Agents see their
// streams end with codes.Unavailable and resend what was not acked to the
// next sink. Close is idempotent.
func (s *Sink) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		done := make(chan struct{})
		go func() {
			s.srv.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(s.cfg.ShutdownTimeout + 5*time.Second):
			s.log.Warn("sink: streams did not end in time; cutting them")
			s.srv.Stop()
			<-done
		}
		// Every handler has returned (WaitForHandlers), so nothing sends
		// on writeCh any more.
		close(s.writeCh)
		<-s.writerDone
		s.closeErr = s.store.Close()
	})
	return s.closeErr
}

// storeSize sums the sizes of the segment files in dir.
func storeSize(dir string) uint64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n uint64
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".seg") {
			if fi, err := e.Info(); err == nil {
				n += uint64(fi.Size())
			}
		}
	}
	return n
}

// loadDedup rebuilds the dedup index: it reads the checkpoint, if any and
// valid, then scans the store from the checkpoint's offset to the end,
// reading only the storedmsg headers.
func (s *Sink) loadDedup() (*dedupIndex, uint64, error) {
	first, next := s.store.FirstOffset(), s.store.NextOffset()
	d := newDedupIndex()
	b, err := seglog.ReadMeta(s.cfg.DataDir, checkpointName)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		s.log.Warn("sink: dedup checkpoint unreadable; rebuilding from the whole store", "err", err)
	default:
		ck, err := parseCheckpoint(b)
		switch {
		case err != nil:
			s.log.Warn("sink: dedup checkpoint invalid; rebuilding from the whole store", "err", err)
		case ck.next > next:
			// The checkpoint is written only after what it covers was
			// synced, so the store cannot be shorter unless it was
			// replaced or damaged.
			s.log.Warn("sink: dedup checkpoint is ahead of the store; rebuilding from the whole store",
				"checkpoint", ck.next, "store_next", next)
		default:
			d = ck
		}
	}
	from := max(d.next, first)
	it := s.store.NewIterator(from, 1<<20)
	var scanned uint64
	for it.Next() {
		scanned++
		m, err := storedmsg.Decode(it.Value())
		if err != nil {
			s.m.corrupt.Inc()
			s.log.Error("sink: store record is not a stored message; it cannot be deduplicated or read", "offset", it.Offset(), "err", err)
			continue
		}
		d.set(string(m.AgentID)).add(m.MessageID)
	}
	if err := it.Err(); err != nil {
		return nil, 0, fmt.Errorf("sink: scan store for dedup: %w", err)
	}
	d.next = next
	return d, scanned, nil
}

// service implements sluicev1.SinkServer for a Sink.
type service struct {
	sluicev1.UnimplementedSinkServer
	s *Sink
}
