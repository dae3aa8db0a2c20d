package sink

import (
	"net"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/logutil"
	"github.com/sluicehq/sluice/internal/protocol"
)

// consumerSlots shares the sink's Read streams out: at most
// Config.MaxConsumers in all and Config.MaxConsumersPerPeer from one IP
// address. Without the per-address share, Read streams from one client
// (one connection carries 256) could take every slot and lock out every
// other consumer (issue 23 item 6: a client opening Read streams it never
// reads had a well-behaved consumer refused). The per-address share, not
// a per-connection one, because one address can open many connections;
// and no tighter by default than the old total, so that a fleet of
// consumers behind one NAT address that was served before still is.
// Memory does not grow with the count the way it would without a shared
// bound: the read chunks of all Read streams share readBufferBudget.
type consumerSlots struct {
	total, perPeer int

	mu     sync.Mutex
	open   int              // open Read streams
	byPeer map[string]int   // open Read streams per IP address
	warned logutil.EveryKey // a warning per IP address once a minute
	// warnedTotal: the warning about the total, once a minute.
	warnedTotal logutil.Every
}

func newConsumerSlots(total, perPeer int) *consumerSlots {
	return &consumerSlots{total: total, perPeer: perPeer, byPeer: make(map[string]int)}
}

// refusal says why take refused a slot.
type refusal int

const (
	admitted refusal = iota
	overTotal
	overPeer
)

// take counts a Read stream from ip; it reports whether it was refused
// and, if so, whether this refusal should be logged (once a minute per
// address, and once a minute for the total).
func (c *consumerSlots) take(ip string, now time.Time) (why refusal, warn bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if why, warn = c.refusalLocked(ip, now); why == admitted {
		c.open++
		c.byPeer[ip]++
	}
	return why, warn
}

// peek is take without counting: whether a Read stream from ip would be
// refused now (and whether to log it). The gRPC server asks it before it
// starts a stream's handler (consumerRefusal).
func (c *consumerSlots) peek(ip string, now time.Time) (why refusal, warn bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refusalLocked(ip, now)
}

// refusalLocked is why a Read stream from ip would be refused now
// (admitted: it would not). Caller holds c.mu.
func (c *consumerSlots) refusalLocked(ip string, now time.Time) (why refusal, warn bool) {
	switch {
	case c.open >= c.total:
		return overTotal, c.warnedTotal.Due(now, time.Minute)
	case c.byPeer[ip] >= c.perPeer:
		return overPeer, c.warned.Due(ip, now, time.Minute)
	}
	return admitted, false
}

// give returns a slot of ip.
func (c *consumerSlots) give(ip string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open--
	if c.byPeer[ip]--; c.byPeer[ip] <= 0 {
		delete(c.byPeer, ip)
	}
}

// addrIP is the host part of a peer address ("127.0.0.1:5000" →
// "127.0.0.1"), or the address itself when it has no port (an in-memory
// transport's name).
func addrIP(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// admitConsumer counts a new Read stream, or refuses it with
// ResourceExhausted when Config.MaxConsumers are being served, or
// Config.MaxConsumersPerPeer from its IP address. The caller calls the
// returned function when the stream ends.
func (s *Sink) admitConsumer(peer protocol.PeerInfo) (func(), error) {
	ip := addrIP(peer.Addr)
	if why, warn := s.slots.take(ip, time.Now()); why != admitted {
		return nil, s.consumerRefused(why, warn, peer.Addr, ip)
	}
	s.consumers.Add(1)
	s.m.consumers.Inc()
	return func() {
		// The slot first: once the gauge says a consumer went, its slot
		// is free (a test waiting on the gauge read slots still taken
		// by streams queued on the slots' lock).
		s.slots.give(ip)
		s.consumers.Add(-1)
		s.m.consumers.Dec()
	}, nil
}

// consumerRefusal is the refusal admitConsumer would give a Read stream
// from the address remote now, counted and logged as admitConsumer counts
// and logs one, or nil. The gRPC server asks it in its tap, before gRPC
// starts a handler goroutine for the stream (serving.Host.ConsumerRefusal):
// a client opening Read streams from an address whose share is taken
// (issue 23 item 6, never-reads: 64 connections × 100 streams) otherwise
// had the sink run thousands of handlers only to refuse each, 40 MB of
// live heap at the peak where 13 MB is left with the tap.
func (s *Sink) consumerRefusal(remote string) error {
	ip := addrIP(remote)
	if why, warn := s.slots.peek(ip, time.Now()); why != admitted {
		return s.consumerRefused(why, warn, remote, ip)
	}
	return nil
}

// consumerRefused counts, notes and (when warn) logs a refused Read
// stream from addr (IP address ip), and returns the error it ends with.
func (s *Sink) consumerRefused(why refusal, warn bool, addr, ip string) error {
	if why == overTotal {
		s.m.refused.WithLabelValues(refusedConsumers).Inc()
		s.noteError("too many consumers (max %d, --max-consumers); a Read stream from %s refused", s.cfg.MaxConsumers, addr)
		if warn {
			s.log.Warn("sink: too many consumers; Read streams refused (logged once a minute)", "max_consumers", s.cfg.MaxConsumers, "peer", addr)
		}
		return protocol.Errorf(protocol.StatusResourceExhausted, "the sink serves at most %d consumers at once", s.cfg.MaxConsumers)
	}
	s.m.refused.WithLabelValues(refusedConsumersPerPeer).Inc()
	s.noteError("too many consumers from %s (max %d per address, --max-consumers-per-peer); a Read stream refused", ip, s.cfg.MaxConsumersPerPeer)
	if warn {
		s.log.Warn("sink: too many consumers from one address; Read streams refused (logged once a minute per address)",
			"peer", ip, "max_consumers_per_peer", s.cfg.MaxConsumersPerPeer)
	}
	return protocol.Errorf(protocol.StatusResourceExhausted, "the sink serves at most %d consumers from one address at once", s.cfg.MaxConsumersPerPeer)
}
