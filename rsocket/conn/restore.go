package conn

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// Resume across a server restart, the machine's part. A server that
// keeps ResumeImage of each resumable session in durable storage (with
// the ordering rule below) can, after a crash, Restore each session as a
// machine whose link is down and take its RESUME as if only the
// connection had broken: the client gets RESUME_OK, the frames it lacks
// are replayed exactly once, and new requests work. What does not
// survive is the handlers: the streams open in the image end, right after
// the replay, with APPLICATION_ERROR (streams this end answers, and
// channels) or CANCEL (requests this end made), which the peer sees as a
// failed request it may retry.
//
// Ordering rule, the driver's: an image must be durable before any byte
// the machine produced after it reaches the peer, so that the image's
// RecvPos is never behind a frame the peer saw answered (the peer drops
// what the server's KEEPALIVE confirmed) and its SentPos never behind a
// frame the peer received.

// ResumeImage is what a server keeps of a resumable session to Restore
// it in another process.
type ResumeImage struct {
	Token []byte
	// The SETUP's timing, and whether it asked for leases.
	KeepaliveInterval, MaxLifetime time.Duration
	Lease                          bool
	// Positions: bytes of resumable frames sent and received.
	SentPos, RecvPos uint64
	// Retained holds the sent frames from RetainedStart to SentPos, each
	// with its 3-byte length prefix: what the client may still lack.
	RetainedStart uint64
	Retained      []byte
	// NextID is the id of the next stream this end would open.
	NextID uint32
	// Streams are the streams open when the image was taken.
	Streams []ImageStream
}

// ImageStream is one open stream of a ResumeImage.
type ImageStream struct {
	ID        uint32
	Kind      Interaction
	Requester bool // this end sent the request
}

// ErrNotRestorable: a session whose state a ResumeImage cannot hold.
var ErrNotRestorable = errors.New("rsocket/conn: session cannot be restored")

// ResumeImage returns the image of an open resumable server session. The
// image shares nothing with the machine. Sessions with the byte-credits
// extension active are not restorable (ErrNotRestorable).
func (m *Machine) ResumeImage() (ResumeImage, error) {
	if m.cfg.Role != Server || m.state != stateOpen || !m.rs.on {
		return ResumeImage{}, fmt.Errorf("%w: ResumeImage is for an open resumable server session", ErrNotAllowed)
	}
	if m.bc.active {
		return ResumeImage{}, fmt.Errorf("%w: the byte-credits extension is active", ErrNotRestorable)
	}
	img := ResumeImage{
		Token:             append([]byte(nil), m.rs.token...),
		KeepaliveInterval: m.keepaliveInterval,
		MaxLifetime:       m.maxLifetime,
		Lease:             m.lease.enabled,
		SentPos:           m.sentPos,
		RecvPos:           m.recvPos,
		RetainedStart:     m.rs.retStart,
		Retained:          append([]byte(nil), m.rs.ret...),
		NextID:            m.nextID,
	}
	// Every stream, also one whose request is still being reassembled:
	// its first fragments count in RecvPos, so the client will not send
	// them again, and only an ERROR ends its wait.
	img.Streams = m.OpenStreams(nil)
	return img, nil
}

// Restore returns a server machine for the session of img, its link
// down since now: AcceptResume takes the client's RESUME as after a
// broken connection, then ends the image's streams (see the top of this
// file). If no RESUME comes within cfg.ResumeSessionLifetime, Tick closes
// it. cfg must be a server configuration with Resume set. A malformed
// image (from a damaged store) is an error, never a panic.
func Restore(cfg Config, img ResumeImage, now time.Duration) (*Machine, error) {
	if cfg.Role != Server || !cfg.Resume {
		return nil, fmt.Errorf("%w: Restore needs a server configuration with Resume", ErrInvalidArgument)
	}
	if err := img.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotRestorable, err)
	}
	m, err := New(cfg, now)
	if err != nil {
		return nil, err
	}
	m.state = stateOpen
	m.keepaliveInterval, m.maxLifetime = img.KeepaliveInterval, img.MaxLifetime
	m.lease.enabled = img.Lease
	m.sentPos, m.recvPos = img.SentPos, img.RecvPos
	m.nextID = img.NextID
	m.rs = resumeState{on: true, token: append([]byte(nil), img.Token...), link: linkDown, downSince: now,
		ret: append([]byte(nil), img.Retained...), retStart: img.RetainedStart}
	for len(m.rs.ret) > m.cfg.ResumeBufferBytes {
		m.dropRetained()
	}
	for _, is := range img.Streams {
		s := m.newStream()
		*s = stream{id: is.ID, kind: is.Kind, requester: is.Requester, announced: true, orphan: true}
		m.streams[is.ID] = s
	}
	m.now = now
	return m, nil
}

// validate checks what Restore relies on.
func (img *ResumeImage) validate() error {
	switch {
	case len(img.Token) == 0 || len(img.Token) > frame.MaxResumeTokenLength:
		return fmt.Errorf("resume token of %d bytes", len(img.Token))
	case img.KeepaliveInterval <= 0 || img.MaxLifetime <= 0:
		return errors.New("keepalive interval and max lifetime must be positive")
	case img.SentPos > frame.MaxPosition || img.RecvPos > frame.MaxPosition || img.RetainedStart > img.SentPos:
		return fmt.Errorf("positions sent %d, received %d, retained from %d", img.SentPos, img.RecvPos, img.RetainedStart)
	case img.NextID == 0 || img.NextID%2 != 0:
		return fmt.Errorf("next stream id %d is not a server's", img.NextID)
	}
	n := uint64(0)
	for rest := img.Retained; len(rest) > 0; {
		f, r, ok := NextFrame(rest)
		if !ok {
			return errors.New("retained frames truncated")
		}
		h, err := frame.ParseHeader(f)
		if err != nil || !countsForResume(h) {
			return errors.New("retained frames hold a frame that is not resumable")
		}
		n += uint64(len(f))
		rest = r
	}
	if n != img.SentPos-img.RetainedStart {
		return fmt.Errorf("retained frames hold %d bytes, positions say %d", n, img.SentPos-img.RetainedStart)
	}
	seen := make(map[uint32]bool, len(img.Streams))
	for _, s := range img.Streams {
		if s.ID == 0 || s.ID > frame.MaxStreamID || seen[s.ID] || s.Kind < RequestResponse || s.Kind > RequestChannel {
			return fmt.Errorf("stream %d (%v) is not a valid open stream", s.ID, s.Kind)
		}
		seen[s.ID] = true
	}
	return nil
}

// endOrphans ends the streams a restored session inherited, whose
// handlers died with the old process: after the replay, so that the
// client first gets everything that was sent on them.
// They end in stream id order: a pure machine's output must not depend
// on map iteration.
func (m *Machine) endOrphans() {
	var ids []uint32
	for id, s := range m.streams {
		if s.orphan {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		s := m.streams[id]
		if s.requester && s.kind != RequestChannel {
			m.emitCancel(id)
		} else {
			m.emitError(id, frame.ErrorCodeApplicationError, "server restarted: the stream's handler is gone; retry the request")
		}
		m.free(s)
	}
}

// ResumeCursor marks how far a persisted copy of a server session goes:
// a driver that keeps the session on disk writes a ResumeImage once,
// then after each step only what changed since its last cursor
// (ResumeTail, and OpenStreams when StreamsVersion moved).
type ResumeCursor struct {
	SentPos, RecvPos, RetainedStart uint64
	NextID                          uint32
	// StreamsVersion changes whenever a stream opens or ends.
	StreamsVersion uint64
	// appended: bytes ever appended to the retained buffer.
	appended uint64
}

// ResumeCursor returns the session's cursor now. It allocates nothing.
func (m *Machine) ResumeCursor() ResumeCursor {
	return ResumeCursor{SentPos: m.sentPos, RecvPos: m.recvPos, RetainedStart: m.rs.retStart,
		NextID: m.nextID, StreamsVersion: m.streamsVersion, appended: m.rs.appended}
}

// ResumeTail returns the retained frames sent since the cursor since was
// taken (length-prefixed, as in ResumeImage.Retained) and the position
// of the first of them: since.SentPos, or a later RetainedStart when
// frames sent since then were already dropped from the retained buffer
// (the whole buffer is then returned). frames aliases the machine's
// buffer: copy or persist it before the machine steps again.
func (m *Machine) ResumeTail(since ResumeCursor) (start uint64, frames []byte) {
	n := m.rs.appended - since.appended
	if m.rs.retStart > since.SentPos || n > uint64(len(m.rs.ret)) {
		return m.rs.retStart, m.rs.ret
	}
	return since.SentPos, m.rs.ret[uint64(len(m.rs.ret))-n:]
}

// OpenStreams appends the open streams to dst, sorted by id, as
// ResumeImage lists them.
func (m *Machine) OpenStreams(dst []ImageStream) []ImageStream {
	start := len(dst)
	for _, s := range m.streams {
		dst = append(dst, ImageStream{ID: s.id, Kind: s.kind, Requester: s.requester})
	}
	slices.SortFunc(dst[start:], func(a, b ImageStream) int { return cmp.Compare(a.ID, b.ID) })
	return dst
}
