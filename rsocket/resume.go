package rsocket

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// Resumption in the driver (docs/rsocket-resume.md). The machine
// (conn.Machine) keeps the session, positions and retained frames; the
// driver only swaps transports under it:
//
//   - When a resumable machine loses its transport it emits
//     EventReconnect and produces no output until resumed. The driver
//     closes the lost transport, drops its unwritten output (the machine
//     replays from its retained buffer what the peer lacks) and, on a
//     client, redials with the same dialer.
//   - A new transport is installed under mu while no write is in flight
//     (swapTransport), with a reader of its own; a reader of an earlier
//     transport sees c.transport changed and exits without touching the machine,
//     so a late error or frame of a lost transport never reaches the new
//     link.
//   - Client: Reconnected queues RESUME as the only output. Server: the
//     first frame of a new transport decides: SETUP starts a session
//     (registered in the ResumeStore by token when it asks for resume),
//     RESUME goes to its session's AcceptResume.

// ResumeConfig configures resumption (WithResume).
type ResumeConfig struct {
	// Token (client): the session's resume token; nil: 16 random bytes
	// per Dial.
	Token []byte
	// BufferBytes bounds the sent frames retained for replay (default
	// 16 MiB). A peer further behind than that is rejected with
	// REJECTED_RESUME, never resumed with a gap.
	BufferBytes int
	// MaxRetainedBytes (server) bounds the frames retained by all of a
	// server's sessions together (default 1 GiB): each session may
	// retain MaxRetainedBytes / sessions, at least 64 KiB, at most
	// BufferBytes, so the bound shrinks as sessions come and grows as
	// they go. Servers sharing one Option value share the budget. Retained
	// frames are trimmed as the client's KEEPALIVEs report what it
	// received; what a session must keep is what was in flight when its
	// connection broke, usually far less than its share.
	MaxRetainedBytes int64
	// SessionLifetime: a session down that long ends with
	// conn.ErrResumeExpired (default 60 s), on either end.
	SessionLifetime time.Duration
	// MinBackoff and MaxBackoff bound the client's exponential backoff
	// between redials (defaults 10 ms and 2 s).
	MinBackoff, MaxBackoff time.Duration
	// DialTimeout bounds one redial (default 10 s).
	DialTimeout time.Duration
	// Store (server) keeps the sessions by token; nil: an in-memory store
	// of DefaultMaxResumeSessions. A store with the optional
	// capabilities JournalingResumeStore and RestoringResumeStore (package
	// rsocket/resumejournal) also journals them, so that a server
	// restarted on its directory resumes them.
	Store ResumeStore
	// PeerIdentity (server) names the credential a connection's client
	// proved in its TLS handshake; a RESUME is accepted only from a
	// connection with the same identity as the SETUP's, so a stolen token
	// alone does not take over another client's session. nil: the SHA-256
	// of the client certificate's public key (SubjectPublicKeyInfo: stable
	// across renewals with the same key), "" without a client
	// certificate, where the token is the only credential.
	PeerIdentity func(*tls.ConnectionState) string
}

// defaultPeerIdentity is the SHA-256 of the client certificate's public
// key, or "" without one.
func defaultPeerIdentity(st *tls.ConnectionState) string {
	if st == nil || len(st.PeerCertificates) == 0 {
		return ""
	}
	sum := sha256.Sum256(st.PeerCertificates[0].RawSubjectPublicKeyInfo)
	return string(sum[:])
}

// peerIdentity is the identity of a connection with TLS state st (nil:
// not TLS) under cfg.
func (cfg *ResumeConfig) peerIdentity(st *tls.ConnectionState) string {
	if cfg.PeerIdentity != nil {
		return cfg.PeerIdentity(st)
	}
	return defaultPeerIdentity(st)
}

// DefaultMaxResumeSessions bounds the default in-memory store.
const DefaultMaxResumeSessions = 10000

// firstFrameTimeout bounds how long a server waits for the first frame
// of a resumable listener's connection (SETUP or RESUME).
const firstFrameTimeout = 10 * time.Second

type resumeOptions struct {
	cfg    ResumeConfig
	budget *retainBudget
}

// Defaults of the server-wide retained-frames budget.
const (
	DefaultMaxRetainedBytes = 1 << 30
	minRetainPerSession     = 64 << 10
)

// retainBudget shares ResumeConfig.MaxRetainedBytes among a server's
// resumable sessions.
type retainBudget struct {
	total, perSessionMax int64
	sessions             atomic.Int64
}

// limit is one session's bound on retained bytes now: its share of the
// budget, at least minRetainPerSession, never above the configured
// BufferBytes.
func (b *retainBudget) limit() int {
	n := max(b.sessions.Load(), 1)
	return int(min(max(b.total/n, minRetainPerSession), b.perSessionMax))
}

// WithResume makes Dial's connection resumable: SETUP carries R and the
// token; when the transport breaks, the client dials the same URL again
// (exponential backoff from MinBackoff to MaxBackoff) until it resumes,
// the session lifetime passes, the server rejects the resume (every stream
// then fails with conn.ErrResumeRejected, and nothing is retried) or the
// application calls Close. Streams survive the break: nothing is lost,
// nothing is delivered twice.
//
// On Serve and ServeWebSocket it accepts resumable clients, keeping their
// sessions in cfg.Store (default: in memory) and routing a RESUME on a
// new connection to its session. Dial's ctx bounds the first dial only,
// as without resumption.
func WithResume(cfg ResumeConfig) Option {
	if cfg.Store == nil {
		cfg.Store = NewMemoryResumeStore(DefaultMaxResumeSessions)
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 10 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(2*time.Second, cfg.MinBackoff)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.MaxRetainedBytes <= 0 {
		cfg.MaxRetainedBytes = DefaultMaxRetainedBytes
	}
	perSession := int64(cfg.BufferBytes)
	if perSession <= 0 {
		perSession = conn.DefaultResumeBufferBytes
	}
	budget := &retainBudget{total: cfg.MaxRetainedBytes, perSessionMax: perSession}
	return func(o *options) {
		o.resume = &resumeOptions{cfg: cfg, budget: budget}
		o.cfg.ResumeBufferBytes = cfg.BufferBytes
		o.cfg.ResumeSessionLifetime = cfg.SessionLifetime
		if o.cfg.Role == conn.Server {
			o.cfg.Resume = true
		}
	}
}

// WithServerResume is WithResume(ResumeConfig{Store: store}) for a server.
func WithServerResume(store ResumeStore) Option { return WithResume(ResumeConfig{Store: store}) }

// ResumeStore keeps a server's resumable sessions by token. The in-memory
// one (NewMemoryResumeStore) is the default; a store shared by several
// servers or persisted across restarts plugs in here (docs/rsocket-resume.md
// describes both).
type ResumeStore interface {
	// Add registers c under token. It fails when the token is in use or
	// the store is full: the SETUP is then rejected (REJECTED_SETUP).
	Add(token []byte, c *Conn) error
	// Lookup returns the session of token, or nil.
	Lookup(token []byte) *Conn
	// Remove forgets token if it still belongs to c.
	Remove(token []byte, c *Conn)
}

// Errors of the resume store.
var (
	ErrResumeTokenInUse     = errors.New("rsocket: resume token in use")
	ErrTooManyResumeSession = errors.New("rsocket: too many resumable sessions")
)

// Optional capabilities of a ResumeStore. The driver checks for them
// with interface assertions, never for a concrete store, so that a
// store that keeps sessions across a server restart lives in a package
// of its own (rsocket/resumejournal) and another can replace it.

// JournalingResumeStore is a ResumeStore that writes every live
// session's state down as it changes, so that a server restarted on the
// store can resume the session (RestoringResumeStore).
type JournalingResumeStore interface {
	ResumeStore
	// StartJournal begins the journal of the live session just
	// registered under token, set up by a client of identity peer
	// (ResumeConfig.PeerIdentity). rewrite, which the store may call from
	// any goroutine (to compact), makes the session write a full image
	// of itself now (SessionJournal.RecordImage) and send what waits;
	// it fails when the image could not be written. nil: the session is
	// not journaled.
	StartJournal(token []byte, peer string, rewrite func() error) SessionJournal
}

// SessionJournal writes one live session down. The driver calls it
// under the session's lock, so one call at a time.
type SessionJournal interface {
	// Record writes what changed in m's session since the last record.
	// The driver calls it before each batch of output goes to the
	// transport, so the journal is never behind what the client saw.
	// ErrJournalClosed: the store is closed (the server is stopping, and
	// the session lives on in the journal as it was): nothing more may
	// be sent. ErrNotJournaled: the session cannot be journaled (it is
	// not restorable); the driver stops calling. Any other failure to
	// write is the journal's to count and retry: it returns nil, and the
	// session goes on.
	Record(m *conn.Machine) error
	// RecordImage writes a full image of m's session now; an error when
	// it could not (ErrJournalClosed and ErrNotJournaled as for Record).
	RecordImage(m *conn.Machine) error
	// End records that the session ended for good.
	End()
}

// Errors a SessionJournal returns to the driver.
var (
	ErrJournalClosed = errors.New("rsocket: resume journal closed")
	ErrNotJournaled  = errors.New("rsocket: session cannot be journaled")
)

// RestoringResumeStore is a ResumeStore that also holds dormant
// sessions: sessions of an earlier server process, read back from its
// journal, waiting for their client's RESUME.
type RestoringResumeStore interface {
	ResumeStore
	// ResumeTarget finds what a RESUME for token resumes, in one step,
	// so that a session moving from dormant to live is never missed: the
	// live session, or the dormant one (then reserved for the caller,
	// which restores it with Adopt or gives it back with Release or
	// Drop), or busy when another connection is restoring it.
	ResumeTarget(token []byte) (live *Conn, dormant *DormantSession, busy bool)
	// Adopt makes c, restored from the dormant session of token, the
	// live session of token.
	Adopt(token []byte, c *Conn) error
	// Release gives back a dormant session ResumeTarget reserved and
	// that was not restored (a RESUME from another client identity, or
	// a restore that failed on its connection).
	Release(token []byte)
	// Drop forgets a dormant session that cannot be restored.
	Drop(token []byte)
}

// DormantSession is a session a RestoringResumeStore holds for its
// client: what conn.Restore rebuilds it from, and the identity of the
// client that set it up (a RESUME must come with the same).
type DormantSession struct {
	Image conn.ResumeImage
	Peer  string
}

// NewMemoryResumeStore returns an in-memory ResumeStore of at most max
// sessions (max <= 0: DefaultMaxResumeSessions).
func NewMemoryResumeStore(max int) ResumeStore {
	if max <= 0 {
		max = DefaultMaxResumeSessions
	}
	return &memoryStore{max: max, m: map[string]*Conn{}}
}

type memoryStore struct {
	mu  sync.Mutex
	max int
	m   map[string]*Conn
}

func (s *memoryStore) Add(token []byte, c *Conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[string(token)]; ok {
		return ErrResumeTokenInUse
	}
	if len(s.m) >= s.max {
		return fmt.Errorf("%w (%d)", ErrTooManyResumeSession, s.max)
	}
	s.m[string(token)] = c
	return nil
}

func (s *memoryStore) Lookup(token []byte) *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[string(token)]
}

func (s *memoryStore) Remove(token []byte, c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[string(token)] == c {
		delete(s.m, string(token))
	}
}

// Len returns the number of sessions (for tests and metrics).
func (s *memoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// ResumeStats counts a resumable connection's transport losses and
// successful resumes.
type ResumeStats struct {
	Lost, Resumed int
}

// ResumeStats returns the connection's resume counters (zero without
// resumption).
func (c *Conn) ResumeStats() ResumeStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resumable == nil {
		return ResumeStats{}
	}
	return c.resumable.stats
}

// resumeConn is a resumable connection's driver state; guarded by c.mu.
type resumeConn struct {
	cfg       ResumeConfig
	dial      func(ctx context.Context) (transport, error) // client
	down      bool                                         // the current transport is lost
	redialing bool                                         // client: redial is running
	stats     ResumeStats
	// client: backoff is the wait before the next redial; it doubles
	// while transports are lost before they resumed (a server that
	// accepts and drops connections must not be redialed in a tight
	// loop) and is reset by a resume. unresumed: the current transport
	// has not resumed yet.
	backoff   time.Duration
	unresumed bool
	// peer (server): the client's identity on the connection that sent
	// the SETUP (ResumeConfig.PeerIdentity); a RESUME must come with the
	// same.
	peer string
	// budget (server, once registered in the store): the shared bound on
	// retained bytes; limit is the bound last applied to the machine.
	budget *retainBudget
	limit  int
	// j (server, with a JournalingResumeStore): the session's journal
	// writer; nil when the session is not journaled.
	j SessionJournal
}

// applyRetainLimit lowers or raises the machine's bound on retained
// frames to the session's current share of the server's budget. Under mu.
func (c *Conn) applyRetainLimit() {
	if c.resumable == nil || c.resumable.budget == nil {
		return
	}
	if l := c.resumable.budget.limit(); l != c.resumable.limit {
		c.resumable.limit = l
		c.machine.SetResumeBufferBytes(l)
	}
}

// transportLost handles EventReconnect: the machine kept the session.
// Under mu.
func (c *Conn) transportLost(err error) {
	r := c.resumable
	if r == nil {
		return
	}
	// Output not yet written is dropped: the machine replays what the
	// peer lacks. writeFailed also makes a failing write in flight on the
	// lost transport a no-op (wrote), not a second loss.
	c.out = c.out[:0]
	c.writeFailed = true
	if !r.down {
		r.down = true
		r.stats.Lost++
		old := c.transport
		go func() { _ = old.Close() }() // unblocks its reader and writer; a WebSocket close may wait
		c.opts.log.Info("rsocket: transport lost, resuming", "err", err)
	}
	if c.machine.Resumable() && c.resumable.dial != nil && !r.redialing {
		r.redialing = true
		go c.redial()
	}
}

// resumed handles EventResumed. Under mu.
func (c *Conn) resumed() {
	if c.resumable != nil {
		c.resumable.stats.Resumed++
		c.resumable.backoff, c.resumable.unresumed = 0, false
		c.opts.log.Info("rsocket: resumed")
	}
	if c.machine.LeaseEnabled() {
		// "LEASE semantics MUST be restarted upon a new connection by
		// sending a LEASE frame from the server" (Protocol.md "Resume
		// Operation"): the machine forgot both leases with the lost
		// transport, so each responder grants anew, right after
		// RESUME_OK and the replay. Requests waiting for a lease go out
		// when the peer's LEASE arrives.
		c.grantLease()
	}
}

// lockIdle takes mu once no write is in flight (a write on a lost
// transport ends quickly: transportLost closed it). It returns false,
// without mu, when the connection closed. It waits on idleWait, which
// the write's end (wrote) closes: no polling.
func (c *Conn) lockIdle() bool {
	for {
		c.mu.Lock()
		if c.closed {
			c.release()
			return false
		}
		if !c.writing {
			return true
		}
		if c.idleWait == nil {
			c.idleWait = make(chan struct{})
		}
		wait := c.idleWait
		c.mu.Unlock()
		select {
		case <-wait:
		case <-c.ctx.Done():
		}
	}
}

// swapTransport installs tr as the connection's transport, with a reader
// of its own. Under mu, with no write in flight.
func (c *Conn) swapTransport(tr transport) {
	c.transport = tr
	c.out = c.out[:0]
	c.writeFailed = false
	c.writeStalled.Store(false)
	c.resumable.down = false
	go c.readLoop(tr)
}

// redial (client) dials until a transport is up and RESUME is queued on
// it, or the connection closes (Close, session lifetime, rejection).
func (c *Conn) redial() {
	r := c.resumable
	c.mu.Lock()
	// A transport lost before it resumed counts as a failed attempt.
	wait := r.unresumed
	c.mu.Unlock()
	backoff := r.cfg.MinBackoff
	if wait {
		c.mu.Lock()
		backoff = max(r.backoff, r.cfg.MinBackoff)
		c.mu.Unlock()
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 || wait {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-c.done:
				t.Stop()
				return
			}
			backoff = min(2*backoff, r.cfg.MaxBackoff)
		}
		ctx, cancel := context.WithTimeout(c.ctx, r.cfg.DialTimeout)
		tr, err := r.dial(ctx)
		cancel()
		if err != nil {
			if c.ctx.Err() != nil {
				return
			}
			c.opts.log.Debug("rsocket: redial failed", "attempt", attempt+1, "err", err)
			continue
		}
		if !c.lockIdle() {
			_ = tr.Close()
			return
		}
		if !r.down {
			// Cannot happen (only a client redials, once at a time), but a
			// second transport must never replace a live one.
			c.release()
			_ = tr.Close()
			return
		}
		c.swapTransport(tr)
		r.backoff, r.unresumed = backoff, true
		err = c.machine.Reconnected(c.now())
		r.redialing = false
		if err != nil {
			c.opts.log.Warn("rsocket: cannot resume", "err", err)
		}
		c.release()
		return
	}
}

// startResumable is start for resumable connections: it installs the
// driver's resume state before anything runs and, on a server, feeds the
// transport's first frame (already read) to the machine.
func startResumable(ctx context.Context, tr transport, role conn.Role, opts []Option, first []byte, peer string, dial func(context.Context) (transport, error)) (*Conn, error) {
	o := buildOptions(role, opts)
	return startConn(ctx, tr, role, o, func(c *Conn) {
		c.resumable = &resumeConn{cfg: o.resume.cfg, dial: dial, peer: peer}
		if role == conn.Client {
			return
		}
		c.mu.Lock()
		c.machine.Receive(c.now(), first)
		if tok := c.machine.ResumeToken(); tok != nil {
			if err := c.register(o.resume, tok, o.resume.cfg.Store.Add); err != nil {
				_ = c.machine.Close(frame.ErrorCodeRejectedSetup, err.Error())
			}
		}
		c.release()
	})
}

// register adds the server session c under tok with add (the store's
// Add; a RestoringResumeStore's Adopt for a session restored from its
// journal), shares the retained-frames budget with it and, with a
// JournalingResumeStore, starts its journal. When the session ends it
// is forgotten.
func (c *Conn) register(ro *resumeOptions, tok []byte, add func([]byte, *Conn) error) error {
	if err := add(tok, c); err != nil {
		return err
	}
	store := ro.cfg.Store
	tok = clone(tok)
	budget := ro.budget
	budget.sessions.Add(1)
	c.resumable.budget = budget
	var j SessionJournal
	if js, ok := store.(JournalingResumeStore); ok {
		j = js.StartJournal(tok, c.resumable.peer, c.rewriteJournal)
		c.resumable.j = j
	}
	context.AfterFunc(c.ctx, func() {
		c.opts.log.Debug("rsocket: session closed, forgotten", "err", c.Err())
		store.Remove(tok, c)
		budget.sessions.Add(-1)
		if j != nil {
			j.End()
		}
	})
	return nil
}

// persist writes the session's journal record before its output goes
// to the transport (pending). false: the journal's store is closed, and
// nothing more may be sent. Under mu, with c.resumable.j set.
func (c *Conn) persist() bool {
	switch err := c.resumable.j.Record(c.machine); {
	case errors.Is(err, ErrJournalClosed):
		return false
	case errors.Is(err, ErrNotJournaled):
		c.resumable.j = nil
	}
	return true
}

// rewriteJournal is the rewrite of StartJournal: a full image of the
// session in its journal now, then its waiting output sent.
func (c *Conn) rewriteJournal() error {
	c.mu.Lock()
	var err error
	if !c.closed && c.resumable != nil && c.resumable.j != nil {
		if err = c.resumable.j.RecordImage(c.machine); errors.Is(err, ErrNotJournaled) {
			c.resumable.j, err = nil, nil
		}
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.combine()
	return nil
}

// serveResumable serves one transport of a resumable listener: its first
// frame is a SETUP (a new connection) or a RESUME (for a session of the
// store). readFirst reads that frame within firstFrameTimeout. tlsState is
// the transport's TLS state (nil: none), whose client identity a RESUME
// must share with its SETUP.
func serveResumable(ctx context.Context, tr transport, readFirst func() ([]byte, error), tlsState *tls.ConnectionState, r Responder, opts []Option) {
	o := buildOptions(conn.Server, opts)
	f, err := readFirst()
	if err != nil {
		o.log.Debug("rsocket: no first frame", "err", err)
		_ = tr.Close()
		return
	}
	if ctx.Err() != nil {
		// The server is stopping: its sessions' transports are being
		// dropped, and their clients redial at once, some before the
		// listener is closed. No answer, so that they resume on the
		// next server (the journal's sessions) instead of on this one,
		// which would drop them again.
		_ = tr.Close()
		return
	}
	f = clone(f) // the reader reuses its buffer
	peer := o.resume.cfg.peerIdentity(tlsState)
	h, err := frame.ParseHeader(f)
	if err != nil || h.Type != frame.TypeResume {
		// SETUP or garbage: the machine answers either.
		if _, err := startResumable(ctx, tr, conn.Server, append([]Option{WithResponder(r)}, opts...), f, peer, nil); err != nil {
			o.log.Warn("rsocket: cannot serve connection", "err", err)
		}
		return
	}
	token, err := conn.ResumeToken(f)
	var (
		c       *Conn
		dormant *DormantSession // a session of a restarted server's journal
		busy    bool            // ...that another connection is restoring
	)
	rs, restoring := o.resume.cfg.Store.(RestoringResumeStore)
	switch {
	case err != nil:
	case restoring:
		c, dormant, busy = rs.ResumeTarget(token)
	default:
		c = o.resume.cfg.Store.Lookup(token)
	}
	msg := "unknown resume token"
	switch {
	case err != nil:
		msg = err.Error()
	case busy:
		// Another connection of this client is restoring the session
		// right now: no answer, so that the client redials and finds it
		// live (a REJECTED_RESUME would end it).
		_ = tr.Close()
		return
	case dormant != nil && dormant.Peer != peer || c != nil && c.resumable != nil && c.resumable.peer != peer:
		// Not the client that set the session up: refuse this
		// connection, and leave the session to its owner.
		if dormant != nil {
			rs.Release(token)
		}
		o.log.Warn("rsocket: RESUME refused: the client's TLS identity differs from its SETUP's")
		msg = "resume from another client identity"
	case dormant != nil:
		if restoreSession(ctx, tr, f, dormant, rs, r, opts) {
			return
		}
		msg = "session could not be restored"
	case c == nil:
		o.log.Debug("rsocket: RESUME for no session in the store")
	default:
		if c.acceptResume(tr, f) {
			return
		}
	}
	rejectResume(tr, msg)
}

// acceptResume resumes c's session over tr, whose first frame was the
// RESUME f. false: c is closed (tr is not used).
func (c *Conn) acceptResume(tr transport, f []byte) bool {
	if c.resumable == nil || !c.lockIdle() {
		return false
	}
	if !c.resumable.down {
		// Half-open: the client gave up on the old transport before we
		// noticed. It is lost now.
		c.machine.TransportClosed(errors.New("rsocket: replaced by a resumed connection"))
		c.drain()
		if c.closed || !c.resumable.down {
			c.opts.log.Debug("rsocket: half-open session could not be taken over", "closed", c.closed, "down", c.resumable.down, "err", c.err)
			c.release()
			return false
		}
	}
	c.swapTransport(tr)
	// A rejection (positions the retained buffer cannot satisfy) is
	// answered by the machine: ERROR[REJECTED_RESUME] on tr, then the
	// session closes and every stream fails.
	c.machine.AcceptResume(c.now(), f)
	c.release()
	return true
}

// restoreSession rebuilds the dormant session d of a restarted server
// (conn.Restore) over tr, whose first frame was the RESUME f, and
// resumes it. false: it could not be restored (tr is not used).
func restoreSession(ctx context.Context, tr transport, f []byte, d *DormantSession, rs RestoringResumeStore, r Responder, opts []Option) bool {
	o := buildOptions(conn.Server, append([]Option{WithResponder(r)}, opts...))
	m, err := conn.Restore(o.cfg, d.Image, 0)
	if err != nil {
		o.log.Warn("rsocket: journal session not restorable", "err", err)
		rs.Drop(d.Image.Token)
		return false
	}
	if d.Image.Lease && !o.lease {
		o.log.Warn("rsocket: journal session used leases, this server has none")
		rs.Drop(d.Image.Token)
		return false
	}
	var regErr error
	_, err = startConn(ctx, tr, conn.Server, o, func(c *Conn) {
		c.machine = m
		c.resumable = &resumeConn{cfg: o.resume.cfg, peer: d.Peer}
		c.mu.Lock()
		// The dormant session becomes this one (Adopt, not Add).
		if regErr = c.register(o.resume, d.Image.Token, rs.Adopt); regErr != nil {
			_ = c.machine.Close(frame.ErrorCodeRejectedResume, regErr.Error())
			c.release()
			return
		}
		close(c.setup)
		// The first record of the restored session is a full image, in
		// takeOut before RESUME_OK and the replay go out.
		c.machine.AcceptResume(c.now(), f)
		c.release()
	})
	if err != nil || regErr != nil {
		o.log.Warn("rsocket: cannot serve a restored session", "err", cmp.Or(err, regErr))
		rs.Release(d.Image.Token) // the next RESUME may try again
		return err == nil         // a registration failure was answered on tr
	}
	o.log.Info("rsocket: session restored from the resume journal")
	return true
}

// rejectResume answers a RESUME that has no session.
func rejectResume(tr transport, msg string) {
	out := frame.ReserveLengthPrefix(nil)
	out, err := frame.AppendError(out, 0, frame.ErrorCodeRejectedResume, msg)
	if err == nil && frame.SetLengthPrefix(out, 0) == nil {
		_ = tr.writeFrames(out)
	}
	_ = tr.Close()
}

// newResumeToken returns 16 random bytes.
func newResumeToken() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return b
}
