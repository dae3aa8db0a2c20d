package rsocket

import (
	"crypto/sha256"
	"crypto/tls"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/rsocket/conn"
)

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
