package grpcserve

import (
	"encoding/binary"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/internal/defaults"
)

// A client can begin a large message on a stream (the 5-byte gRPC length
// prefix, or part of the message) and then stop sending: grpc-go buffers
// what arrived until the message is complete, with no deadline, and the
// connection looks alive (the client's transport answers keepalive pings;
// the hello timeout only covers streams that never sent a Hello). Each
// such stream holds up to the message limit of sink memory forever.
//
// The stall watch puts a deadline on a partial message. Every connection's
// plaintext HTTP/2 bytes (under TLS, after the handshake: stallCreds) go
// through a stallConn, which follows the frames both ways without copying:
// the DATA of each client stream, cut into gRPC messages by their length
// prefixes, and the flow-control windows the sink grants. A stream is
// stalled when it holds at least stallBytes of an incomplete message and
// has received less than stallBytes more of it in Config.StallTimeout
// while the client could send (its stream and connection windows open, so
// the sink is not the one holding it back). The sink then closes the connection: the client's
// streams fail and a real agent reconnects and resends.
//
// The watch is a StallWatch of its own, so that the agent's OTLP/gRPC
// receiver (internal/agent/collect/otlpgrpc), which buffers its clients'
// messages the same way, applies the same rule.
//
// Byte counts alone (bytes since the last complete message) cannot tell a
// partial message from the pings and window updates of an idle agent or a
// consumer that has caught up; following the frames can, and it sees each
// stream on its own, so that one stream completing messages does not
// cover for another that stalled.

// stallBytes is the least of an incomplete message a stalled stream holds
// before it is cut: below it a stall costs little, and the hello timeout
// and the stream limits bound the rest.
const stallBytes = defaults.StallBytes

// HTTP/2 frame types and flags that the watch follows (RFC 9113).
const (
	h2Data         = 0x0
	h2Headers      = 0x1
	h2RSTStream    = 0x3
	h2Settings     = 0x4
	h2WindowUpdate = 0x8

	h2FlagEndStream = 0x1
	h2FlagAck       = 0x1
	h2FlagPadded    = 0x8

	h2SettingInitialWindow = 0x4
	// h2DefaultWindow is the window before any SETTINGS or WINDOW_UPDATE.
	h2DefaultWindow = 65535
	// h2ClientPreface is the length of "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".
	h2ClientPreface = 24
	// h2MaxCollect bounds the payload kept of a frame the watch reads
	// (SETTINGS, WINDOW_UPDATE): grpc-go's SETTINGS are a few entries.
	h2MaxCollect = 256
)

// stallStream is what the watch knows of one client stream.
type stallStream struct {
	// win is the client's send window on the stream: the initial window
	// plus the sink's WINDOW_UPDATEs, minus the DATA received.
	win int64
	// prefix holds the length prefix of the message being received
	// (prefixN bytes of it so far); rest is what the message still lacks
	// once the prefix is complete.
	prefix  [5]byte
	prefixN int
	rest    int64
	// held is the bytes of the incomplete message received so far.
	held int64
	// fed counts the message bytes received (DATA without padding, which
	// would let a client look busy without moving its message on), done
	// the messages completed.
	fed  int64
	done uint64
	// The checker's mark: fed and done when it last saw the stream make
	// progress (stallBytes more of its messages, a message completed, or
	// a closed window), and when.
	marked   bool
	markFed  int64
	markDone uint64
	markAt   time.Time
}

// feed takes DATA payload bytes of the stream and follows the messages.
func (st *stallStream) feed(p []byte) {
	st.fed += int64(len(p))
	for len(p) > 0 {
		if st.prefixN < len(st.prefix) {
			n := copy(st.prefix[st.prefixN:], p)
			st.prefixN += n
			st.held += int64(n)
			p = p[n:]
			if st.prefixN == len(st.prefix) {
				st.rest = int64(binary.BigEndian.Uint32(st.prefix[1:]))
			}
		} else {
			n := int(min(int64(len(p)), st.rest))
			st.rest -= int64(n)
			st.held += int64(n)
			p = p[n:]
		}
		if st.prefixN == len(st.prefix) && st.rest == 0 { // message complete
			st.prefixN, st.held = 0, 0
			st.done++
		}
	}
}

// h2scan follows the frames of one direction of a connection as bytes
// pass, in pieces of any size.
type h2scan struct {
	skip  int // preface bytes still to pass over
	hdr   [9]byte
	hdrN  int
	typ   byte
	flags byte
	sid   uint32
	left  int // payload bytes of the current frame still to come
	// DATA: padPending when the pad length byte is still to come; pad is
	// the padding at the end of the frame.
	padPending bool
	pad        int
	// collecting: the current frame's payload is gathered in collect,
	// whose array is kept from frame to frame.
	collecting bool
	collect    []byte
}

// StallWatch is the stall watch of one gRPC server: the sink's (Server)
// or another's that reads client messages (the agent's OTLP/gRPC
// receiver). Its connections come through Listener or Creds; Run looks
// at them.
type StallWatch struct {
	o StallOptions

	// conns are the open connections the watch follows, under mu.
	mu    sync.Mutex
	conns map[*stallConn]struct{}
}

// StallOptions configure a StallWatch.
type StallOptions struct {
	// Timeout: how long a stream may hold an incomplete message of at
	// least StallBytes while receiving less than StallBytes more of it.
	Timeout time.Duration
	// OnStall runs for each connection the watch closes, with the peer's
	// address and the bytes its stalled streams held: the server counts
	// and logs it in its own words.
	OnStall func(peer string, held int64)
	// Tick and Now, if set, drive the watch instead of a ticker and the
	// monotonic clock; Checked runs after each look (tests).
	Tick    <-chan time.Time
	Now     func() time.Time
	Checked func()
}

// NewStallWatch makes a watch; it looks at nothing until Run.
func NewStallWatch(o StallOptions) *StallWatch {
	return &StallWatch{o: o, conns: make(map[*stallConn]struct{})}
}

// stallConn is a server connection followed by the stall watch.
type stallConn struct {
	net.Conn
	w *StallWatch

	in, out h2scan // used by grpc's reader and writer goroutines

	mu      sync.Mutex
	streams map[uint32]*stallStream
	initWin int64 // the sink's SETTINGS_INITIAL_WINDOW_SIZE
	connWin int64 // the client's connection send window

	closeOnce sync.Once
}

// Listener wraps lis so that the watch follows what it accepts:
// plaintext, each connection as it is accepted; with TLS (the server's
// credentials from Creds), after the handshake.
func (w *StallWatch) Listener(lis net.Listener, plaintext bool) net.Listener {
	return &stallListener{Listener: lis, w: w, plaintext: plaintext}
}

type stallListener struct {
	net.Listener
	w         *StallWatch
	plaintext bool
}

func (l *stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.w.conn(c, l.plaintext), nil
}

// conn is c as a server must serve it for the watch: plaintext HTTP/2 is
// followed from here; a connection that TLS will wrap (Creds) is marked
// so that the watch forgets it if grpc-go closes it before serving.
func (w *StallWatch) conn(c net.Conn, plaintext bool) net.Conn {
	hc := &hookConn{Conn: c}
	if plaintext {
		return w.track(hc)
	}
	return hc
}

// track wraps c, a connection carrying plaintext HTTP/2, and registers
// it with the watch.
func (w *StallWatch) track(c net.Conn) *stallConn {
	return w.watch(newStallConn(w, c))
}

func newStallConn(w *StallWatch, c net.Conn) *stallConn {
	sc := &stallConn{Conn: c, w: w, streams: make(map[uint32]*stallStream),
		initWin: h2DefaultWindow, connWin: h2DefaultWindow}
	sc.in.skip = h2ClientPreface
	return sc
}

func (w *StallWatch) watch(sc *stallConn) *stallConn {
	w.mu.Lock()
	w.conns[sc] = struct{}{}
	w.mu.Unlock()
	return sc
}

func (c *stallConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.in.scan(p[:n], c.inFrame, c.inData, nil, c.inEnd)
		c.mu.Unlock()
	}
	return n, err
}

func (c *stallConn) Write(p []byte) (int, error) {
	// Scan before writing: a client may act on a window update as soon as
	// it is sent, and its DATA must not be counted against the old one.
	c.mu.Lock()
	c.out.scan(p, c.outFrame, nil, c.outPayload, c.outEnd)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *stallConn) Close() error {
	c.forget()
	return c.Conn.Close()
}

// forget unregisters the connection from the watch.
func (c *stallConn) forget() {
	c.closeOnce.Do(func() {
		c.w.mu.Lock()
		delete(c.w.conns, c)
		c.w.mu.Unlock()
	})
}

// scan passes over p, calling frame at each frame header, data with the
// data of DATA frames (padding removed), collect'ed payloads of the frame
// types it wants (payload set) and end once a frame is complete.
func (h *h2scan) scan(p []byte, frame func(h *h2scan) (collect bool), data func(h *h2scan, p []byte), payload func(h *h2scan), end func(h *h2scan)) {
	for len(p) > 0 {
		if h.skip > 0 {
			n := min(h.skip, len(p))
			h.skip -= n
			p = p[n:]
			continue
		}
		if h.hdrN < len(h.hdr) {
			n := copy(h.hdr[h.hdrN:], p)
			h.hdrN += n
			p = p[n:]
			if h.hdrN < len(h.hdr) {
				return
			}
			h.left = int(h.hdr[0])<<16 | int(h.hdr[1])<<8 | int(h.hdr[2])
			h.typ, h.flags = h.hdr[3], h.hdr[4]
			h.sid = binary.BigEndian.Uint32(h.hdr[5:]) & 0x7fffffff
			h.padPending = h.typ == h2Data && h.flags&h2FlagPadded != 0
			h.pad = 0
			h.collect = h.collect[:0]
			// A payload past h2MaxCollect is not collected at all, whatever
			// the reads: kept in part, it would depend on where they cut
			// it (FuzzStallScan).
			h.collecting = frame(h) && h.left <= h2MaxCollect
			if h.collecting && h.collect == nil {
				h.collect = make([]byte, 0, h2MaxCollect)
			}
		} else {
			n := min(h.left, len(p))
			chunk := p[:n]
			h.left -= n
			p = p[n:]
			if h.typ == h2Data && data != nil {
				if h.padPending && len(chunk) > 0 {
					h.pad = int(chunk[0])
					h.padPending = false
					chunk = chunk[1:]
				}
				// The last pad bytes of the frame are not data.
				if over := h.pad - h.left; over > 0 {
					chunk = chunk[:max(0, len(chunk)-over)]
				}
				if len(chunk) > 0 {
					data(h, chunk)
				}
			} else if h.collecting {
				h.collect = append(h.collect, chunk...)
			}
		}
		if h.hdrN == len(h.hdr) && h.left == 0 {
			if h.collecting && payload != nil {
				payload(h)
			}
			end(h)
			h.hdrN = 0
		}
	}
}

// inFrame sees the header of a frame from the client.
func (c *stallConn) inFrame(h *h2scan) bool {
	switch h.typ {
	case h2Headers:
		// A new stream (or trailers, which end it).
		if h.sid != 0 && c.streams[h.sid] == nil && h.flags&h2FlagEndStream == 0 {
			c.streams[h.sid] = &stallStream{win: c.initWin}
		}
	case h2Data:
		c.connWin -= int64(h.left)
		if st := c.streams[h.sid]; st != nil {
			st.win -= int64(h.left)
		}
	case h2RSTStream:
		delete(c.streams, h.sid)
	}
	return false
}

func (c *stallConn) inData(h *h2scan, p []byte) {
	if st := c.streams[h.sid]; st != nil {
		st.feed(p)
	}
}

func (c *stallConn) inEnd(h *h2scan) {
	if (h.typ == h2Data || h.typ == h2Headers) && h.flags&h2FlagEndStream != 0 {
		delete(c.streams, h.sid) // the client sends nothing more on it
	}
}

// outFrame sees the header of a frame from the sink.
func (c *stallConn) outFrame(h *h2scan) bool {
	switch h.typ {
	case h2Settings:
		return h.sid == 0 && h.flags&h2FlagAck == 0
	case h2WindowUpdate:
		return true
	case h2RSTStream:
		delete(c.streams, h.sid)
	case h2Headers:
		if h.flags&h2FlagEndStream != 0 { // trailers: the stream is over
			delete(c.streams, h.sid)
		}
	}
	return false
}

func (c *stallConn) outPayload(h *h2scan) {
	switch h.typ {
	case h2Settings:
		for p := h.collect; len(p) >= 6; p = p[6:] {
			if binary.BigEndian.Uint16(p) == h2SettingInitialWindow {
				w := int64(binary.BigEndian.Uint32(p[2:]))
				for _, st := range c.streams {
					st.win += w - c.initWin
				}
				c.initWin = w
			}
		}
	case h2WindowUpdate:
		if len(h.collect) < 4 {
			return
		}
		inc := int64(binary.BigEndian.Uint32(h.collect) & 0x7fffffff)
		if h.sid == 0 {
			c.connWin += inc
		} else if st := c.streams[h.sid]; st != nil {
			st.win += inc
		}
	}
}

func (c *stallConn) outEnd(*h2scan) {}

// stalled reports the bytes held by the connection's stalled streams (0:
// none stalled), and marks the streams that progressed since their mark.
//
// Progress is stallBytes more of the stream's messages, or a message
// completed: a client trickling a byte now and then does not keep a
// partial message alive, since at stallBytes per timeout the message is
// complete (and handled, and its memory freed) within
// MaxMessageBytes/stallBytes timeouts. A closed window counts as progress:
// the sink is not reading (its own back-pressure), so the client cannot
// send, and it gets a whole timeout once the window opens.
func (c *stallConn) stalled(now time.Time, timeout time.Duration) (held int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.streams {
		open := st.win > 0 && c.connWin > 0
		if !st.marked || !open || st.done != st.markDone || st.fed-st.markFed >= stallBytes {
			st.marked, st.markFed, st.markDone, st.markAt = true, st.fed, st.done, now
			continue
		}
		if st.held >= stallBytes && now.Sub(st.markAt) >= timeout {
			held += st.held
		}
	}
	return held
}

// Run looks at every connection each tick (a quarter of the stall
// timeout) and closes those with a stalled stream, until done is closed.
func (w *StallWatch) Run(done <-chan struct{}) {
	tick, now := w.o.Tick, w.o.Now
	if tick == nil {
		t := time.NewTicker(max(w.o.Timeout/4, time.Millisecond))
		defer t.Stop()
		tick = t.C
	}
	if now == nil {
		start := time.Now()
		// time.Since reads the monotonic clock: a wall clock step does not
		// cut or spare anyone.
		now = func() time.Time { return start.Add(time.Since(start)) }
	}
	for {
		select {
		case <-done:
			return
		case <-tick:
		}
		t := now()
		w.mu.Lock()
		conns := make([]*stallConn, 0, len(w.conns))
		for c := range w.conns {
			conns = append(conns, c)
		}
		w.mu.Unlock()
		for _, c := range conns {
			if held := c.stalled(t, w.o.Timeout); held > 0 {
				if w.o.OnStall != nil {
					w.o.OnStall(c.RemoteAddr().String(), held)
				}
				c.Close()
			}
		}
		if w.o.Checked != nil {
			w.o.Checked()
		}
	}
}

// Creds wraps a server's TLS credentials so that the watch follows the
// decrypted HTTP/2 of each connection (accepted through Listener with
// plaintext false).
func (w *StallWatch) Creds(tc credentials.TransportCredentials) credentials.TransportCredentials {
	return stallCreds{TransportCredentials: tc, w: w}
}

// stallCreds are TLS credentials whose connections the watch follows.
type stallCreds struct {
	credentials.TransportCredentials
	w *StallWatch
}

func (c stallCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	sc := newStallConn(c.w, conn)
	if pc, ok := raw.(*hookConn); ok {
		// grpc-go closes the raw connection, not this one, when it fails
		// between the handshake and serving: forget it then too.
		pc.onClose = sc.forget
	}
	return c.w.watch(sc), info, nil
}

func (c stallCreds) Clone() credentials.TransportCredentials {
	return stallCreds{TransportCredentials: c.TransportCredentials.Clone(), w: c.w}
}

// HeldBytes is what the watched connections' streams hold of incomplete
// messages: the memory a stall would keep.
func (w *StallWatch) HeldBytes() int64 {
	w.mu.Lock()
	conns := make([]*stallConn, 0, len(w.conns))
	for c := range w.conns {
		conns = append(conns, c)
	}
	w.mu.Unlock()
	var held int64
	for _, c := range conns {
		c.mu.Lock()
		for _, st := range c.streams {
			held += st.held
		}
		c.mu.Unlock()
	}
	return held
}
