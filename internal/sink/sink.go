package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/dirlock"
	"github.com/sluicehq/sluice/internal/wire"
	"github.com/sluicehq/sluice/seglog"
)

// Sink is the gRPC server that agents deliver to and consumers read from.
// Create it with New, run it with Serve, stop it with Close.
type Sink struct {
	cfg    Config
	log    *slog.Logger
	m      *metrics
	dicts  *dictStore
	groups *groupStore
	srv    *grpc.Server

	// store is where messages go: seg (the embedded seglog, nil with
	// Kafka) or kafka (nil without).
	store store
	seg   *seglog.Log
	kafka *kafkaStore
	dedup *dedupIndex

	// writeCh feeds the storage writer; closed by Close once no stream
	// handler is left.
	writeCh    chan writeItem
	writerDone chan struct{}
	w          *writer

	// The store's availability and the Send streams to tell when it
	// changes, under statusMu.
	statusMu     sync.Mutex
	available    bool
	statusDetail string
	statusSince  time.Time
	sendStreams  map[*sendStream]struct{}
	// writeErr is why the last group commit failed, nil once one
	// succeeded: what Ready reports for the embedded store.
	writeErr error

	// consumers counts the Read streams being served (admitConsumer).
	consumers atomic.Int64
	// readDecoders holds *bodyDecoder shared by the Read streams of the
	// embedded store.
	readDecoders sync.Pool

	// closing is closed when Close begins.
	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error

	started time.Time

	// stallConns are the open connections the stall watch follows
	// (stall.go), under stallMu.
	stallMu    sync.Mutex
	stallConns map[*stallConn]struct{}

	// lock is the exclusive lock on DataDir, held from New to the end of
	// Close: two sinks on one data directory would both append to the
	// store and overwrite each other's records.
	lock *dirlock.Lock
}

// New opens (or creates) the sink's data directory, opens the store
// (Config.Store) and rebuilds the dedup index from the last checkpoint,
// and starts the storage writer. It does not listen: call Serve.
func New(cfg Config) (*Sink, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	kind, ku, _ := parseStore(cfg.Store) // validated
	log := cfg.Logger
	// Lock first: nothing in DataDir may be touched while another sink
	// owns it.
	lock, err := dirlock.Acquire(cfg.DataDir, "data")
	if err != nil {
		return nil, fmt.Errorf("sink: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			lock.Release()
		}
	}()
	if err := mkdirDurable(filepath.Join(cfg.DataDir, "dicts")); err != nil {
		return nil, fmt.Errorf("sink: create data directory: %w", err)
	}
	m := newMetrics(cfg.Registry, kind == storeKafka)
	s := &Sink{
		cfg:         cfg,
		log:         log,
		m:           m,
		dicts:       newDictStore(filepath.Join(cfg.DataDir, "dicts")),
		groups:      &groupStore{dir: filepath.Join(cfg.DataDir, "groups")},
		writeCh:     make(chan writeItem, 4096),
		writerDone:  make(chan struct{}),
		closing:     make(chan struct{}),
		started:     time.Now(),
		available:   true,
		statusSince: time.Now(),
		sendStreams: make(map[*sendStream]struct{}),
		lock:        lock,
		stallConns:  make(map[*stallConn]struct{}),
	}
	s.readDecoders.New = func() any { return &bodyDecoder{dicts: s.dicts} }
	m.storeAvailable.Set(1)
	switch kind {
	case storeKafka:
		k, d, err := openKafka(s, ku)
		if err != nil {
			return nil, err
		}
		s.store, s.kafka, s.dedup = k, k, d
	default:
		e, d, err := openEmbedded(s)
		if err != nil {
			return nil, err
		}
		s.store, s.seg, s.dedup = e, e.log, d
	}
	s.w = newWriter(s, s.dedup)
	go s.w.run()

	sopts := []grpc.ServerOption{
		// HTTP/2 flow control caps a stream at window ÷ RTT: gRPC's
		// default 64 KiB would cap a 150 ms link at 430 KB/s, and even its
		// dynamic (BDP) window stops at 16 MiB, 110 MB/s at 150 ms. The
		// stream window is at least the default byte credit, so credits,
		// not HTTP/2, bound what is in flight.
		grpc.InitialWindowSize(wire.InitialWindowSize),
		grpc.InitialConnWindowSize(wire.InitialConnWindowSize),
		// A message being received is buffered whole: keep the limit at
		// the largest Request a well-behaved agent sends, so that half a
		// message cannot hold more.
		grpc.MaxRecvMsgSize(maxRequestBytes(cfg.MaxMessageBytes)),
		grpc.MaxConcurrentStreams(uint32(cfg.MaxStreamsPerConn)),
		grpc.MaxSendMsgSize(MaxMessageBytesLimit + (1 << 20)),
		grpc.KeepaliveParams(serverKeepalive),
		grpc.KeepaliveEnforcementPolicy(serverKeepalivePolicy),
		grpc.WaitForHandlers(true),
		experimental.BufferPool(serverBufferPool),
		grpc.ForceServerCodecV2(protoCodec{}),
	}
	if cfg.TLS != nil {
		// The stall watch follows the decrypted HTTP/2 (without TLS, the
		// listener wraps each connection: peerLimitListener).
		sopts = append(sopts, grpc.Creds(stallCreds{TransportCredentials: credentials.NewTLS(cfg.TLS), s: s}))
	}
	if cfg.Tokens != nil {
		sopts = append(sopts, grpc.ChainStreamInterceptor(cfg.Tokens.StreamInterceptor()),
			grpc.ChainUnaryInterceptor(cfg.Tokens.UnaryInterceptor()))
	}
	s.srv = grpc.NewServer(sopts...)
	sluicev1.RegisterSinkServer(s.srv, &service{s: s})
	go s.watchStalls()
	ok = true
	return s, nil
}

// serverKeepalive makes the sink ping a connection that has been quiet for
// Time and close it when the ping is not answered within Timeout, so a
// half-open agent (host gone, NAT entry dropped) is detected within about
// 40 s and its stream ends instead of holding its queue forever.
var serverKeepalive = keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}

// serverKeepalivePolicy lets clients ping as often as every MinTime, with
// or without a stream. gRPC clients cannot ping more often than every 10 s
// (their minimum keepalive time); a MinTime of half that leaves room for
// timer jitter, so an agent pinging every 10 s is never cut with
// GOAWAY "too_many_pings".
var serverKeepalivePolicy = keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}

// Registry returns the registry holding the sink's metrics
// (Config.Registry, or the sink's own).
func (s *Sink) Registry() *prometheus.Registry { return s.cfg.Registry }

// Store returns the sink's embedded store, for tests and tools that read
// it directly; nil when messages go to Kafka (Config.Store). Appending to
// it is reserved to the sink.
func (s *Sink) Store() *seglog.Log { return s.seg }

// Serve accepts connections on lis until Close. It returns nil after Close.
func (s *Sink) Serve(lis net.Listener) error {
	select {
	case <-s.closing:
		lis.Close()
		return nil
	default:
	}
	if !s.authEnabled() && !isLoopback(lis.Addr()) {
		s.log.Warn("sink: NO AUTHENTICATION on a non-loopback address: anyone who reaches it may send as any agent "+
			"(and have that agent's later messages dropped as duplicates) and read every record; "+
			"configure tokens (--tokens) or mutual TLS (--client-ca)", "addr", lis.Addr().String())
	}
	err := s.srv.Serve(newPeerLimitListener(s, lis, s.cfg.MaxConnsPerPeer))
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// requestFraming is what a Request holds beyond its payload (version,
// message id, record count, field tags and lengths) with room to spare,
// and what zstd may add to an incompressible batch.
const requestFraming = 64 << 10

// maxRequestBytes is the gRPC receive limit: the largest payload (a batch
// of maxMessage bytes, or a dictionary upload, which
// codec.ParseDictionary takes up to MaxDictionarySize + 64 KiB) plus
// framing.
func maxRequestBytes(maxMessage int64) int {
	return int(max(maxMessage, codec.MaxDictionarySize+64<<10)) + requestFraming
}

// isLoopback reports whether addr is a loopback address (127.0.0.0/8,
// ::1); an unspecified address (0.0.0.0, ::) listens on every interface.
func isLoopback(addr net.Addr) bool {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.IsLoopback()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback() || host == "localhost"
}

// Close shuts the sink down gracefully: it stops accepting connections and
// streams, lets every Send stream get what it queued stored and acked
// (within ShutdownTimeout), stores everything handed to the storage
// writer, writes a dedup checkpoint and closes the store. Agents see their
// streams end with codes.Unavailable and resend what was not acked to the
// next sink. If the store cannot take what is left (Kafka down), Close
// gives up on it after another ShutdownTimeout: it was never acked, so the
// agents still have it. Close is idempotent.
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
		select {
		case <-s.writerDone:
		case <-time.After(s.cfg.ShutdownTimeout):
			s.log.Warn("sink: the store did not take the last messages in time; abandoning them (they were not acked)")
			s.store.abort()
			<-s.writerDone
		}
		s.closeErr = s.store.close()
		// Only now may another sink open the data directory.
		if err := s.lock.Release(); err != nil {
			s.closeErr = errors.Join(s.closeErr, fmt.Errorf("sink: release data directory lock: %w", err))
		}
	})
	return s.closeErr
}

// Ready reports whether the sink can take messages now: nil when it is
// not shutting down and its store is writable, an error saying why not
// otherwise. The embedded store is writable unless its last group commit
// failed (disk full, I/O error; a later successful commit makes it
// writable again); the Kafka store is writable while its health monitor
// sees Kafka answering and acknowledging writes (the state agents are
// told through store_status). It serves /readyz.
func (s *Sink) Ready() error {
	select {
	case <-s.closing:
		return errors.New("sink is shutting down")
	default:
	}
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	if s.kafka != nil {
		if !s.available {
			return fmt.Errorf("Kafka store unavailable: %s", s.statusDetail)
		}
		return nil
	}
	if s.writeErr != nil {
		return fmt.Errorf("store does not accept appends: %v", s.writeErr)
	}
	return nil
}

// setWriteErr records the outcome of a group commit for Ready.
func (s *Sink) setWriteErr(err error) {
	s.statusMu.Lock()
	s.writeErr = err
	s.statusMu.Unlock()
}

// setStoreStatus records whether the store takes writes. On a change it
// logs once, sets sluice_sink_store_available and tells every connected
// agent with a ServiceMessage{store_status}.
func (s *Sink) setStoreStatus(available bool, detail string) {
	s.statusMu.Lock()
	if available == s.available {
		s.statusMu.Unlock()
		return
	}
	was := time.Since(s.statusSince)
	s.available, s.statusDetail, s.statusSince = available, detail, time.Now()
	status := &sluicev1.StoreStatus{Available: available, Detail: detail}
	for st := range s.sendStreams {
		st.pushStatus(status)
	}
	n := len(s.sendStreams)
	s.statusMu.Unlock()
	if available {
		s.m.storeAvailable.Set(1)
		s.log.Warn("sink: store available again; storing and granting credits", "unavailable_for", was.Round(time.Millisecond), "agents_told", n)
	} else {
		s.m.storeAvailable.Set(0)
		s.m.storeOutages.Inc()
		s.log.Warn("sink: store unavailable; withholding credits, agents keep spooling", "detail", detail, "agents_told", n)
	}
}

// addSendStream registers st for store status changes and, if the store
// is unavailable now, tells it so.
func (s *Sink) addSendStream(st *sendStream) {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	s.sendStreams[st] = struct{}{}
	if !s.available {
		st.pushStatus(&sluicev1.StoreStatus{Available: false, Detail: s.statusDetail})
	}
}

func (s *Sink) removeSendStream(st *sendStream) {
	s.statusMu.Lock()
	delete(s.sendStreams, st)
	s.statusMu.Unlock()
}

// recordLimit is the largest record the store takes, 0 if only
// MaxMessageBytes bounds it.
func (s *Sink) recordLimit() int {
	if s.kafka != nil {
		return s.kafka.recordLimit
	}
	return 0
}

// service implements sluicev1.SinkServer for a Sink.
type service struct {
	sluicev1.UnimplementedSinkServer
	s *Sink
}

// accepting returns Unavailable once the sink is shutting down, so new
// streams are refused while the existing ones drain.
func (s *Sink) accepting() error {
	select {
	case <-s.closing:
		return status.Error(codes.Unavailable, "sink is shutting down")
	default:
		return nil
	}
}

// recvFirst receives a stream's first message (what names it, for the
// error), giving up after Config.HelloTimeout, at shutdown, or when the
// stream ends. A stream that stays silent would otherwise hold its
// goroutines and buffers until the client leaves, and hold up Close.
func recvFirst[T any](s *Sink, ctx context.Context, recv func() (*T, error), what string) (*T, error) {
	type result struct {
		m   *T
		err error
	}
	ch := make(chan result, 1)
	// Once the handler returns, gRPC cancels the stream and this Recv
	// returns.
	go func() {
		m, err := recv()
		ch <- result{m, err}
	}()
	t := time.NewTimer(s.cfg.HelloTimeout)
	defer t.Stop()
	if s.cfg.helloWait != nil {
		s.cfg.helloWait()
	}
	select {
	case r := <-ch:
		return r.m, r.err
	case <-t.C:
		s.m.streamsCut.WithLabelValues(cutHelloTimeout).Inc()
		s.log.Warn("sink: stream sent nothing within the hello timeout; ending it", "expected", what,
			"hello_timeout", s.cfg.HelloTimeout, "peer", peerAddr(ctx))
		return nil, status.Errorf(codes.DeadlineExceeded, "no %s within %v", what, s.cfg.HelloTimeout)
	case <-s.closing:
		return nil, status.Error(codes.Unavailable, "sink is shutting down")
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}
