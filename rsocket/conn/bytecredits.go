package conn

import (
	"encoding/binary"
	"fmt"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// Byte credits: sluice's optional extension that limits a stream's PAYLOADs
// by bytes as well as by REQUEST_N items (rsocket/rsocket#83), specified in
// docs/rsocket.md "Byte credits extension". In short:
//
//   - Both frames are EXT frames with the I flag, so a peer that does not
//     know them ignores them (Protocol.md "Frame Header Format": I = may be
//     ignored) and the connection stays plain RSocket.
//   - The client announces it with EXT[ExtByteCreditsWindow] on stream 0 as
//     the frame right after SETUP, carrying the bytes it grants each stream
//     at its start. A server that supports it answers with its own
//     EXT[ExtByteCreditsWindow] on stream 0 before any other frame it sends
//     after reading the offer; a server that does not, ignores it.
//   - A stream is governed when the request that opened it traveled after
//     the announcement of the direction it traveled in: every request of the
//     client (the offer precedes them), and the server's requests sent after
//     its answer. Both ends see the same frame order, so they agree without
//     another round trip. Only request-stream and request-channel are
//     governed (request-response has one element, bounded by the max
//     payload size).
//   - On a governed stream each direction starts with the receiver's window
//     of byte credits; EXT[ExtRequestBytes] on the stream grants more
//     (cumulative, like REQUEST_N). A sender may send an element (a PAYLOAD
//     with N; fragmented: the whole payload) only while it has an item
//     credit AND a positive byte credit; the element's metadata plus data
//     bytes are then subtracted, which may leave the byte credit negative
//     (a payload larger than the window still goes through, alone). So the
//     receiver never holds more than its grants plus one payload.
//   - A receiver that gets an element while the sender's byte credit is not
//     positive fails the stream with ERROR[INVALID], as for REQUEST_N.

// Extended types of the byte-credits extension (EXT frames, I flag set).
// They sit in a range no RSocket extension registry uses ("SLB" + n).
const (
	// ExtByteCreditsWindow: stream 0; data = u32 initial window (bytes,
	// 1..2^31-1) the sender grants each governed stream it receives on.
	ExtByteCreditsWindow uint32 = 0x534C4201
	// ExtRequestBytes: a stream; data = u32 more bytes (1..2^31-1) granted.
	ExtRequestBytes uint32 = 0x534C4202
)

// maxByteCredits caps accumulated byte credits (they are cumulative and
// would otherwise overflow after 2^32 grants of 2^31-1).
const maxByteCredits = 1 << 62

// byteExt is the connection's state of the extension.
type byteExt struct {
	offered    bool   // client: the offer went out after SETUP
	awaiting   bool   // server: the next frame may be the offer
	active     bool   // client: the server answered; server: the client offered (and we answered)
	peerWindow uint32 // the peer's initial window per stream
}

// emitExtU32 queues one of the extension's frames. It goes through finish
// like every other frame: an EXT[ExtRequestBytes] grant is on a stream, so
// it counts toward the resume positions and is retained for replay, the
// same rule the receiver applies (countsForResume). A grant lost in a cut
// must be replayed, or the stream waits for bytes its receiver believes it
// granted; the offer and its answer are on stream 0 and do not count.
func (m *Machine) emitExtU32(stream, extType, v uint32) {
	var data [4]byte
	binary.BigEndian.PutUint32(data[:], v)
	at := len(m.out)
	m.out = frame.ReserveLengthPrefix(m.out)
	out, err := frame.AppendExt(m.out, stream, frame.FlagIgnore, extType, nil, data[:])
	_ = m.finish(at, out, err)
}

// parseExtU32 returns the extension frame's type and value; ok is false for
// an EXT frame that is not one of ours or is malformed (then ignored).
func parseExtU32(e frame.Ext) (extType, v uint32, ok bool) {
	if e.ExtendedType != ExtByteCreditsWindow && e.ExtendedType != ExtRequestBytes {
		return 0, 0, false
	}
	if len(e.Data) != 4 || e.Metadata != nil {
		return 0, 0, false
	}
	v = binary.BigEndian.Uint32(e.Data)
	if v == 0 || v > frame.MaxRequestN {
		return 0, 0, false
	}
	return e.ExtendedType, v, true
}

// govern puts s under byte credits, when the kind has elements to limit.
func (m *Machine) govern(s *stream) {
	if s.kind != RequestStream && s.kind != RequestChannel {
		return
	}
	s.governed = true
	s.sendBytes = int64(m.bc.peerWindow)
	s.recvBytes = int64(m.cfg.ByteCredits)
}

// receiveExt handles an EXT frame that passed the codec. It returns false
// when the frame is not the extension's, for the generic EXT rule.
func (m *Machine) receiveExt(e frame.Ext) bool {
	t, v, ok := parseExtU32(e)
	if !ok || m.cfg.ByteCredits == 0 {
		return false
	}
	switch {
	case t == ExtByteCreditsWindow && e.StreamID == 0:
		// The offer is handled in Receive (it must be the first frame after
		// SETUP); here only the client takes the server's answer.
		if m.cfg.Role == Client && m.bc.offered && !m.bc.active {
			m.bc.active, m.bc.peerWindow = true, v
			// The client's own streams opened before the answer are
			// governed: the server read the offer before their requests,
			// and sent nothing on them before its answer.
			for _, s := range m.streams {
				if s.requester {
					m.govern(s)
				}
			}
		}
	case t == ExtRequestBytes && e.StreamID != 0:
		s := m.streams[e.StreamID]
		if s == nil || !s.announced || !s.sendOpen || !s.governed {
			return true // unknown stream or nothing to send: ignore
		}
		s.sendBytes = min(s.sendBytes+int64(v), maxByteCredits)
		m.events = append(m.events, Event{Kind: EventRequestN, StreamID: s.id, Bytes: v})
	}
	return true
}

// receiveOffer (server): the frame right after SETUP is the client's offer
// or the extension is off for this connection. It returns true when b was
// the offer (consumed).
func (m *Machine) receiveOffer(h frame.Header, b []byte) bool {
	m.bc.awaiting = false
	if h.Type != frame.TypeExt || h.StreamID != 0 {
		return false
	}
	e, err := frame.ParseExt(b)
	if err != nil {
		return false
	}
	t, v, ok := parseExtU32(e)
	if !ok || t != ExtByteCreditsWindow {
		return false
	}
	m.bc.active, m.bc.peerWindow = true, v
	m.emitExtU32(0, ExtByteCreditsWindow, m.cfg.ByteCredits)
	return true
}

// RequestBytes grants the peer n (1..2^31-1) more bytes on stream id, a
// stream governed by the byte-credits extension (ErrNotAllowed otherwise:
// the extension is off, or the stream is not a stream or channel, or was
// opened before the extension was agreed).
func (m *Machine) RequestBytes(id uint32, n uint32) error {
	s, err := m.live(id)
	if err != nil {
		return err
	}
	if n == 0 || n > frame.MaxRequestN {
		return fmt.Errorf("%w: request bytes %d must be in 1..2^31-1", ErrInvalidArgument, n)
	}
	if !s.governed || !s.recvOpen {
		return fmt.Errorf("%w: stream %d is not receiving under byte credits", ErrNotAllowed, id)
	}
	s.recvBytes = min(s.recvBytes+int64(n), maxByteCredits)
	m.emitExtU32(id, ExtRequestBytes, n)
	return nil
}

// ByteCredits returns the byte credits of stream id: what we may still
// send (may be negative after a payload larger than the credit), what the
// peer may still send us, and whether the stream is governed by the
// extension at all.
func (m *Machine) ByteCredits(id uint32) (send, recv int64, governed bool) {
	s := m.streams[id]
	if s == nil || !s.governed {
		return 0, 0, false
	}
	return s.sendBytes, s.recvBytes, true
}

// ByteCreditsActive reports whether the peer agreed to the extension.
func (m *Machine) ByteCreditsActive() bool { return m.bc.active }

func payloadBytes(md, data []byte) int64 { return int64(len(md) + len(data)) }
