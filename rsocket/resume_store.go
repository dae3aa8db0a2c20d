package rsocket

import (
	"errors"
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/rsocket/conn"
)

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
