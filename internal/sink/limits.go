package sink

import (
	"net"
	"sync"
	"time"
)

// peerLimitListener closes connections beyond max open ones per peer IP
// as soon as they are accepted, so that one host cannot hold the sink's
// memory through connections (each may buffer up to the HTTP/2 connection
// window, and stream messages up to the message limit). A client over the
// limit sees its connection closed and retries with backoff.
type peerLimitListener struct {
	net.Listener
	s   *Sink
	max int

	mu     sync.Mutex
	open   map[string]int
	warned map[string]time.Time // last warning per peer, to keep the log quiet
}

func newPeerLimitListener(s *Sink, l net.Listener, max int) *peerLimitListener {
	return &peerLimitListener{Listener: l, s: s, max: max, open: make(map[string]int), warned: make(map[string]time.Time)}
}

func (l *peerLimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := peerIP(c.RemoteAddr())
		l.mu.Lock()
		if l.open[ip] >= l.max {
			now := time.Now()
			warn := now.Sub(l.warned[ip]) >= time.Minute
			if warn {
				l.warned[ip] = now
			}
			l.mu.Unlock()
			l.s.m.refused.WithLabelValues(refusedConnsPerPeer).Inc()
			l.s.noteError("too many connections from %s (max %d per peer); new ones closed", ip, l.max)
			if warn {
				l.s.log.Warn("sink: too many connections from one peer; closing the new ones (logged once a minute per peer)",
					"peer", ip, "max_conns_per_peer", l.max)
			}
			c.Close()
			continue
		}
		l.open[ip]++
		l.mu.Unlock()
		var pc net.Conn = &peerConn{Conn: c, l: l, ip: ip}
		if l.s.cfg.TLS == nil {
			// Plaintext HTTP/2: the stall watch follows it here (with TLS,
			// after the handshake: stallCreds).
			pc = l.s.trackStalls(pc)
		}
		return pc, nil
	}
}

func (l *peerLimitListener) release(ip string) {
	l.mu.Lock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
	l.mu.Unlock()
}

// peerIP is the host part of addr: the key connections are counted by.
func peerIP(addr net.Addr) string {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

// peerConn gives its slot back once, on the first Close (and runs
// onClose, if set, then).
type peerConn struct {
	net.Conn
	l       *peerLimitListener
	ip      string
	once    sync.Once
	onClose func()
}

func (c *peerConn) Close() error {
	c.once.Do(func() {
		c.l.release(c.ip)
		if c.onClose != nil {
			c.onClose()
		}
	})
	return c.Conn.Close()
}
