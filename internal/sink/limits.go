package sink

import (
	"net"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/logutil"
	"github.com/sluicehq/sluice/internal/protocol"
)

// peerTable bounds, per IP address, the open connections that have not
// proven who they are: connections with no Send session past its Hello
// and authentication (Config.MaxConnsPerPeer). Each such connection may
// buffer up to the HTTP/2 connection window, and its streams up to the
// message limit, so one host opening many of them could hold the sink's
// memory; beyond the limit new connections are closed as soon as they
// are accepted, and the client retries with backoff.
//
// A connection carrying a Send session whose Hello was accepted no
// longer counts: from then on the bound is per agent identity (one live
// session per agent id, see Sink.addSendStream), so a fleet behind one
// NAT gateway, or a sink behind a load balancer that rewrites source
// addresses, is not refused at its 65th agent. When the last session of
// a connection ends it counts again (the count may then exceed the
// limit for a while: the connection is not closed, but no new one from
// that address is accepted until the count is below the limit).
//
// The table knows the connections of the gRPC listener only (grpcserve
// admits them through Serving().Admit); sessions
// over other transports (RSocket, memconn) find no entry and count
// nothing.
type peerTable struct {
	s   *Sink
	max int
	// total caps every open connection, identified or not
	// (Config.MaxConns): what bounds the sink's file descriptors when
	// max does not.
	total int

	mu sync.Mutex
	// anonymous: per IP, open connections with no identified session.
	anonymous map[string]int
	// byAddr: every open connection, by connKey of its local and remote
	// addresses (a session's protocol.PeerInfo.Local and Addr).
	byAddr map[string]*peerConn
	warned logutil.EveryKey // a warning per peer once a minute, to keep the log quiet
	// open counts every open connection; warnedTotal: the warning about
	// total, once a minute.
	open        int
	warnedTotal logutil.Every
}

func newPeerTable(s *Sink, max, total int) *peerTable {
	return &peerTable{s: s, max: max, total: total, anonymous: make(map[string]int),
		byAddr: make(map[string]*peerConn)}
}

// admit counts c as an anonymous connection of its IP, or reports false
// (logged, counted) when the IP holds the maximum already.
func (t *peerTable) admit(c net.Conn) (*peerConn, bool) {
	ip := peerIP(c.RemoteAddr())
	t.mu.Lock()
	if t.open >= t.total {
		warn := t.warnedTotal.Due(time.Now(), time.Minute)
		t.mu.Unlock()
		t.s.m.refused.WithLabelValues(refusedConns).Inc()
		t.s.noteError("%d connections open, the maximum (--max-conns); new ones closed", t.total)
		if warn {
			t.s.log.Warn("sink: too many connections open; closing the new ones (logged once a minute)", "max_conns", t.total)
		}
		return nil, false
	}
	if t.anonymous[ip] >= t.max {
		warn := t.warned.Due(ip, time.Now(), time.Minute)
		t.mu.Unlock()
		t.s.m.refused.WithLabelValues(refusedConnsPerPeer).Inc()
		t.s.noteError("too many connections from %s not yet past a Hello (max %d per peer); new ones closed", ip, t.max)
		if warn {
			t.s.log.Warn("sink: too many connections from one peer that have not identified themselves; closing the new ones (logged once a minute per peer)",
				"peer", ip, "max_conns_per_peer", t.max)
		}
		return nil, false
	}
	t.anonymous[ip]++
	t.open++
	pc := &peerConn{Conn: c, t: t, ip: ip, addr: connKey(c.LocalAddr().String(), c.RemoteAddr().String())}
	if old := t.byAddr[pc.addr]; old == nil {
		t.byAddr[pc.addr] = pc
	}
	t.mu.Unlock()
	return pc, true
}

// closed gives c's slot back (once).
func (t *peerTable) closed(c *peerConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	t.open--
	if c.sessions == 0 {
		t.dec(c.ip)
	}
	if t.byAddr[c.addr] == c {
		delete(t.byAddr, c.addr)
	}
}

func (t *peerTable) dec(ip string) {
	if t.anonymous[ip]--; t.anonymous[ip] <= 0 {
		delete(t.anonymous, ip)
	}
}

// connKey names a connection by both its ends: a client may use one
// source address and port towards two listeners of the sink (gRPC and
// RSocket, or two gRPC ones).
func connKey(local, remote string) string { return local + " " + remote }

// identified records a session that proved its agent identity on the
// connection peer describes; the returned func, called when the session
// ends, undoes it. A connection with one such session or more does not
// count against MaxConnsPerPeer.
func (t *peerTable) identified(peer protocol.PeerInfo) (done func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.byAddr[connKey(peer.Local, peer.Addr)]
	if c == nil || c.closed {
		return func() {}
	}
	if c.sessions++; c.sessions == 1 {
		t.dec(c.ip)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			if c.sessions--; c.sessions == 0 && !c.closed {
				t.anonymous[c.ip]++
			}
		})
	}
}

// counts returns the anonymous connections of ip and every open
// connection (tests).
func (t *peerTable) counts(ip string) (anonymous, open int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.anonymous[ip], t.open
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

// peerConn gives its slot back once, on the first Close.
type peerConn struct {
	net.Conn
	t    *peerTable
	ip   string
	addr string
	once sync.Once
	// sessions (identified Send sessions open on it) and closed are
	// guarded by t.mu.
	sessions int
	closed   bool
}

func (c *peerConn) Close() error {
	c.once.Do(func() {
		c.t.closed(c)
	})
	return c.Conn.Close()
}
