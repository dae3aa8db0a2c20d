package sink

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/dirlock"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/kafkastore"
	"github.com/sluicehq/sluice/internal/store/seglogstore"
	"github.com/sluicehq/sluice/internal/transport/serving"
	"github.com/sluicehq/sluice/seglog"
)

// Sink is what agents deliver to and consumers read from: a
// protocol.Service (ServeSend, ServeRead) over its store. Transports carry
// it (grpcserve.Serve, rsockettransport.Serve, memconn) with what
// Serving gives them. Create it with New, stop it with Close.
type Sink struct {
	cfg   Config
	log   *slog.Logger
	m     *metrics
	dicts *store.Dicts

	// store is where messages go: seg (the embedded seglog, nil with
	// Kafka) or kafka (nil without).
	store store.Store
	seg   *seglog.Log
	// reader reads the embedded store back (nil with Kafka).
	reader store.Reader
	kafka  *kafkastore.Store
	dedup  *store.Dedup

	// writeCh feeds the storage writer; closed by Close once no stream
	// handler is left.
	writeCh    chan store.Message
	writerDone chan struct{}
	w          *writer

	// The store's availability and the Send streams to tell when it
	// changes, under statusMu.
	statusMu     sync.Mutex
	available    bool
	statusDetail string
	statusSince  time.Time
	sendStreams  map[*session]struct{}
	// live: the one Send session of each agent id that is served (a new
	// Hello replaces the agent's older session: addSendStream).
	live map[string]*session
	// agentsSeen: every agent that opened a Send session (Agents).
	agentsSeen map[string]*agentSeen
	// lastErr and lastErrAt: the newest failure counted (noteError).
	lastErr   string
	lastErrAt time.Time
	// writeErr is why the last group commit failed, nil once one
	// succeeded: what Ready reports for the embedded store.
	writeErr error

	// consumers counts the Read streams being served (admitConsumer),
	// for the read chunk size; slots shares them out.
	consumers atomic.Int64
	slots     *consumerSlots
	// readDecoders holds *store.BodyDecoder shared by the Read streams of the
	// embedded store.
	readDecoders sync.Pool

	// closing is closed when Close begins.
	closing   chan struct{}
	closeOnce sync.Once

	// sessions counts the ServeSend and ServeRead calls running, from any
	// transport: Close waits for them before it closes the writer's
	// channel, since gRPC's GracefulStop only knows its own handlers (a
	// session over memconn or RSocket sending on the closed channel
	// panicked). conns lets Close cut the ones that outlive the timeout.
	sessMu   sync.Mutex
	sessions sync.WaitGroup
	conns    map[protocol.Conn]struct{}
	closeErr error

	started time.Time

	// peers bounds the connections of one IP address that have not
	// proven an identity (Config.MaxConnsPerPeer, limits.go).
	peers *peerTable

	// servers are the transports' servers attached to the sink
	// (Serving().Attach), under sessMu: Close stops them first.
	servers []serving.Stopper

	// lock is the exclusive lock on DataDir, held from New to the end of
	// Close: two sinks on one data directory would both append to the
	// store and overwrite each other's records.
	lock *dirlock.Lock
}

// New opens (or creates) the sink's data directory, opens the store
// (Config.Store) and rebuilds the dedup index from the last checkpoint,
// and starts the storage writer. It does not listen: a transport serves
// it (grpcserve.Serve(s.Serving(), lis) for gRPC).
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
		dicts:       store.NewDicts(filepath.Join(cfg.DataDir, "dicts")),
		writeCh:     make(chan store.Message, 4096),
		writerDone:  make(chan struct{}),
		closing:     make(chan struct{}),
		started:     time.Now(),
		available:   true,
		statusSince: time.Now(),
		sendStreams: make(map[*session]struct{}),
		live:        make(map[string]*session),
		agentsSeen:  make(map[string]*agentSeen),
		lock:        lock,
	}
	s.peers = newPeerTable(s, cfg.MaxConnsPerPeer, cfg.MaxConns)
	s.slots = newConsumerSlots(cfg.MaxConsumers, cfg.MaxConsumersPerPeer)
	s.readDecoders.New = func() any { return &store.BodyDecoder{Dicts: s.dicts} }
	m.storeAvailable.Set(1)
	switch kind {
	case storeKafka:
		k, d, err := kafkastore.Open(kafkastore.Env{
			Log: log, DataDir: cfg.DataDir, MaxMessageBytes: cfg.MaxMessageBytes, StartTimeout: cfg.KafkaStartTimeout,
			TailHold: cfg.tailHold, Dicts: s.dicts, OnStatus: s.setStoreStatus,
			Metrics: kafkastore.Metrics{Produce: m.kafkaProduce, CatchUp: m.kafkaCatchUp, Records: m.kafkaRecords,
				TailRecords: m.kafkaTailRecords, Foreign: m.kafkaForeign, TailSkipped: m.kafkaTailSkipped, Lag: m.kafkaLag},
		}, ku)
		if err != nil {
			return nil, err
		}
		s.store, s.kafka, s.dedup = k, k, d
	default:
		e, d, err := seglogstore.Open(seglogstore.Options{
			DataDir: cfg.DataDir, MaxMessageBytes: cfg.MaxMessageBytes, SegmentBytes: cfg.SegmentBytes,
			Logger: log, Registry: cfg.Registry,
			OnSync: func(d time.Duration) {
				m.fsync.Observe(d.Seconds())
				if cfg.OnStoreSync != nil {
					cfg.OnStoreSync()
				}
			},
			OnCorrupt: m.corrupt.Inc,
		})
		if err != nil {
			return nil, err
		}
		s.store, s.reader, s.seg, s.dedup = e, e, e.Log(), d
	}
	s.w = newWriter(s, s.dedup)
	dedup := s.dedup
	cfg.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "sink", Name: "dedup_gaps",
		Help: "Gaps between message ids the dedup index keeps, over all agents (an agent's Hello settles those below its watermark)."},
		func() float64 {
			dedup.Lock()
			defer dedup.Unlock()
			return float64(dedup.Runs())
		}))
	go s.w.run()

	ok = true
	return s, nil
}

// Registry returns the registry holding the sink's metrics
// (Config.Registry, or the sink's own).
func (s *Sink) Registry() *prometheus.Registry { return s.cfg.Registry }

// Store returns the sink's embedded store, for tests and tools that read
// it directly; nil when messages go to Kafka (Config.Store). Appending to
// it is reserved to the sink.
func (s *Sink) Store() *seglog.Log { return s.seg }

// Close shuts the sink down gracefully: it stops accepting connections and
// streams, lets every Send stream get what it queued stored and acked
// (within ShutdownTimeout), stores everything handed to the storage
// writer, writes a dedup checkpoint and closes the store. Agents see their
// sessions end with StatusUnavailable and resend what was not acked to the
// next sink. If the store cannot take what is left (Kafka down), Close
// gives up on it after another ShutdownTimeout: it was never acked, so the
// agents still have it. Close is idempotent.
func (s *Sink) Close() error {
	s.closeOnce.Do(func() {
		s.sessMu.Lock() // no session (nor server) enters after this (see enter, attach)
		close(s.closing)
		servers := s.servers
		s.sessMu.Unlock()
		s.stopServers(servers)
		// Sessions of other transports end as gRPC's do (they watch
		// closing); once every one has returned nothing sends on writeCh.
		s.waitSessions(s.cfg.ShutdownTimeout + 5*time.Second)
		close(s.writeCh)
		select {
		case <-s.writerDone:
		case <-time.After(s.cfg.ShutdownTimeout):
			s.log.Warn("sink: the store did not take the last messages in time; abandoning them (they were not acked)")
			s.store.Abort()
			<-s.writerDone
		}
		s.closeErr = s.store.Close()
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
			//lint:ignore ST1005 Kafka is a name, capitalized wherever it stands
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
	n := len(s.sendStreams)
	// The metric and the log come before the agents are told, so that
	// whoever sees the status (an agent, a test) finds them already
	// there; the change happens under statusMu, so that the status pushes
	// of two changes cannot interleave.
	if available {
		s.m.storeAvailable.Set(1)
		s.log.Warn("sink: store available again; storing and granting credits", "unavailable_for", was.Round(time.Millisecond), "agents_told", n)
	} else {
		s.m.storeAvailable.Set(0)
		s.m.storeOutages.Inc()
		s.log.Warn("sink: store unavailable; withholding credits, agents keep spooling", "detail", detail, "agents_told", n)
	}
	status := &protocol.StoreStatus{Available: available, Detail: detail}
	for st := range s.sendStreams {
		st.pushStatus(status)
	}
	s.statusMu.Unlock()
}

// addSendStream registers st for store status changes and, if the store
// is unavailable now, tells it so.
// addSendStream lists st, and makes it its agent's live session: an
// older session of the same agent id is ended with StatusAborted
// ("replaced by a newer session"). One agent id, one session: an agent
// that reconnects over a new connection while its old one is still open
// on the sink (a half-open TCP connection, a NAT rebinding) takes over at
// once instead of waiting for keepalive to end the old one, and the
// sink's streams are bounded by its agents, not by their connections.
// The old session's messages are safe: what it handed to the writer is
// stored and acked to the old session's own store.Acks (never to the new
// session's), and the agent's resend on the new session is acked as a
// duplicate by the writer's dedup by (agent id, message id).
func (s *Sink) addSendStream(st *session) {
	s.statusMu.Lock()
	old := s.live[st.agent]
	s.live[st.agent] = st
	s.sendStreams[st] = struct{}{}
	a := s.seen(st.agent)
	warn := old != nil && a.replacedWarned.Due(time.Now(), time.Minute)
	a.connected++
	a.vouched = st.vouched
	if !s.available {
		st.pushStatus(&protocol.StoreStatus{Available: false, Detail: s.statusDetail})
	}
	s.statusMu.Unlock()
	if old != nil {
		s.m.streamsCut.WithLabelValues(cutReplaced).Inc()
		s.noteError("a session of agent %s replaced by a newer one (%s)", st.agent, st.conn.Peer().Addr)
		if warn {
			old.log.Warn("sink: a newer session of the same agent id replaced this one; ending it "+
				"(if this repeats, two agents share one agent id; logged once a minute per agent, "+
				"counted in sluice_sink_streams_cut_total{reason=\"replaced\"})", "new_session", st.session,
				"new_peer", st.conn.Peer().Addr, "old_peer", old.conn.Peer().Addr)
		}
		old.conn.Close(errReplaced(st.agent, st.session))
	}
}

// errReplaced ends a session replaced by a newer one of its agent.
func errReplaced(agent, session string) error {
	return protocol.Errorf(protocol.StatusAborted, "replaced by a newer session of agent %q (session %s)", agent, session)
}

func (s *Sink) removeSendStream(st *session) {
	s.statusMu.Lock()
	delete(s.sendStreams, st)
	if s.live[st.agent] == st {
		delete(s.live, st.agent)
	}
	renewIfEmpty(&s.sendStreams)
	renewIfEmpty(&s.live)
	a := s.seen(st.agent)
	a.connected--
	r, d := st.acks.Counts()
	a.records += r
	a.duplicates += d
	a.lastSeen = time.Now()
	s.statusMu.Unlock()
}

// renewIfEmpty replaces *m by a new empty map once its last entry is
// gone. A Go map keeps the memory it grew to when its entries are
// deleted: the sink's maps of sessions, grown to thousands of entries by
// a client opening streams as fast as it can, held that memory for the
// sink's life after the client went (docs/reliability.md, "Hostile
// clients on every listener"). An empty map is dropped, not a smaller
// one, so that the common case (sessions come and go) costs one small
// allocation when the last leaves.
func renewIfEmpty[K comparable, V any](m *map[K]V) {
	if len(*m) == 0 && *m != nil {
		*m = make(map[K]V)
	}
}

// recordLimit is the largest record the store takes, 0 if only
// MaxMessageBytes bounds it.
func (s *Sink) recordLimit() int {
	if s.kafka != nil {
		return s.kafka.RecordLimit()
	}
	return 0
}

// accepting returns Unavailable once the sink is shutting down, so new
// sessions are refused while the existing ones drain.
func (s *Sink) accepting() error {
	select {
	case <-s.closing:
		return protocol.Errorf(protocol.StatusUnavailable, "sink is shutting down")
	default:
		return nil
	}
}

// enter registers a session; the returned func ends it. After Close has
// begun no session enters, so Close's wait cannot miss one.
func (s *Sink) enter(c protocol.Conn) (leave func(), err error) {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if err := s.accepting(); err != nil {
		return nil, err
	}
	if s.conns == nil {
		s.conns = map[protocol.Conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	s.sessions.Add(1)
	return func() {
		s.sessMu.Lock()
		delete(s.conns, c)
		renewIfEmpty(&s.conns)
		s.sessMu.Unlock()
		s.sessions.Done()
	}, nil
}

// waitSessions waits for every session to return, cutting those still
// running after timeout (their clients see Unavailable and resend
// elsewhere: nothing unacknowledged is lost).
func (s *Sink) waitSessions(timeout time.Duration) {
	done := make(chan struct{})
	go func() {
		s.sessions.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-time.After(timeout):
	}
	s.sessMu.Lock()
	for c := range s.conns {
		c.Close(protocol.Errorf(protocol.StatusUnavailable, "sink is shutting down"))
	}
	s.sessMu.Unlock()
	<-done
}

// recvFirst receives a session's first frame (what names it, for the
// error), giving up after Config.HelloTimeout, at shutdown, or when the
// session ends. A session that stays silent would otherwise hold its
// goroutines and buffers until the client leaves, and hold up Close.
func recvFirst(s *Sink, c protocol.Conn, what string) (protocol.Frame, error) {
	type result struct {
		f   protocol.Frame
		err error
	}
	ch := make(chan result, 1)
	// Once the handler returns, the transport ends the session and this
	// Recv returns.
	go func() {
		f, err := c.Recv()
		ch <- result{f, err}
	}()
	t := time.NewTimer(s.cfg.HelloTimeout)
	defer t.Stop()
	if s.cfg.helloWait != nil {
		s.cfg.helloWait()
	}
	ctx := c.Context()
	select {
	case r := <-ch:
		return r.f, r.err
	case <-t.C:
		s.m.streamsCut.WithLabelValues(cutHelloTimeout).Inc()
		s.noteError("a stream from %s sent no %s within %v; ended", c.Peer().Addr, what, s.cfg.HelloTimeout)
		s.log.Warn("sink: stream sent nothing within the hello timeout; ending it", "expected", what,
			"hello_timeout", s.cfg.HelloTimeout, "peer", c.Peer().Addr)
		return nil, protocol.Errorf(protocol.StatusDeadlineExceeded, "no %s within %v", what, s.cfg.HelloTimeout)
	case <-s.closing:
		return nil, protocol.Errorf(protocol.StatusUnavailable, "sink is shutting down")
	case <-ctx.Done():
		return nil, ctxErr(ctx)
	}
}
