package sink

import (
	"net"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/transport/serving"
)

// Serving is what a transport's server needs to carry the sink: the sink
// as its protocol.Service, the limits and timeouts of Config that concern
// connections, the per-address connection caps (Config.MaxConnsPerPeer,
// MaxConns: limits.go), and the metrics the server counts into. A server
// given it is stopped by Close (Attach).
func (s *Sink) Serving() serving.Host {
	return serving.Host{
		Service: s, Logger: s.log,
		TLS: s.cfg.TLS, Tokens: s.cfg.Tokens, Authenticated: s.authEnabled(),
		MaxMessageBytes: s.cfg.MaxMessageBytes, MaxMessageBytesLimit: MaxMessageBytesLimit,
		MaxStreamsPerConn: s.cfg.MaxStreamsPerConn,
		HandshakeTimeout:  s.cfg.HandshakeTimeout, KeepaliveTime: s.cfg.KeepaliveTime, KeepaliveTimeout: s.cfg.KeepaliveTimeout,
		StallTimeout: s.cfg.StallTimeout,
		Admit: func(c net.Conn) (net.Conn, bool) {
			pc, ok := s.peers.admit(c)
			if !ok {
				return nil, false
			}
			return pc, true
		},
		ConsumerRefusal: s.consumerRefusal,
		NoteError:       s.noteError,
		Attach:          s.attach,
		Closing:         s.closing,
		StalledConns:    s.m.stalledConns, StreamCapReached: s.m.connStreamCap,
		WaitingRefused: s.m.refused.WithLabelValues(refusedWaitingStreams),
	}
}

// attach registers srv for Close to stop, unless Close has begun.
func (s *Sink) attach(srv serving.Stopper) error {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if err := s.accepting(); err != nil {
		return err
	}
	s.servers = append(s.servers, srv)
	return nil
}

// stopServers stops the attached servers gracefully (no new connection,
// the running sessions end as they see closing), and cuts them if their
// sessions outlast ShutdownTimeout and a margin.
func (s *Sink) stopServers(servers []serving.Stopper) {
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for _, srv := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				srv.GracefulStop()
			}()
		}
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(s.cfg.ShutdownTimeout + 5*time.Second):
		s.log.Warn("sink: streams did not end in time; cutting them")
		for _, srv := range servers {
			srv.Stop()
		}
		<-done
	}
}

// authEnabled reports whether the sink knows who its clients are: tokens,
// or mutual TLS (a client certificate binds an identity, see
// auth.CertIdentity). Without either, anyone reaching the port may send as
// any agent and read everything.
func (s *Sink) authEnabled() bool { return s.cfg.Tokens != nil || auth.MutualTLS(s.cfg.TLS) }
