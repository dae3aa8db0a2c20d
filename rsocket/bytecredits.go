package rsocket

import (
	"github.com/sluicehq/sluice/rsocket/frame"
)

// WithByteCredits turns on sluice's byte-credits extension (docs/rsocket.md
// "Byte credits extension"): each stream or channel this end receives on
// starts with n bytes of credit (1..2^31-1) besides its REQUEST_N items,
// and the sender stops when either runs out, so a stream of large payloads
// holds at most about n bytes plus one payload at the receiver. The
// receiving Stream grants the bytes again as the application consumes
// them, at half the window. A peer without the extension ignores it and
// the connection is plain RSocket; 0 turns it off.
func WithByteCredits(n uint32) Option { return func(o *options) { o.cfg.ByteCredits = n } }

// usedBytes counts an element the application took and grants its bytes
// back to the sender once half the window was consumed (the top-up policy
// of used, in bytes). Streams the extension does not govern refuse the
// grant in the machine, which costs one loop command per half window.
func (s *Stream) usedBytes(p Payload) {
	w := int64(s.c.opts.cfg.ByteCredits)
	if w == 0 {
		return
	}
	s.bytes += int64(len(p.Metadata) + len(p.Data))
	if s.bytes == 0 || s.bytes < w/2 {
		return
	}
	n := s.bytes
	s.bytes = 0
	st := s.st
	s.c.post(func() {
		if s.c.streams[st.id] != st || st.recvDone {
			return
		}
		for n > 0 {
			k := min(n, frame.MaxRequestN)
			if s.c.machine.RequestBytes(st.id, uint32(k)) != nil {
				return // not governed (the peer lacks the extension)
			}
			n -= k
		}
	})
}
