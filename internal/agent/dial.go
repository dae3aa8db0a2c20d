package agent

import (
	"fmt"
	"io"
	"strings"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
	"github.com/sluicehq/sluice/internal/transport/rsockettransport"
)

// RSocketScheme prefixes a sink address reached over RSocket instead of
// gRPC: rsocket+tcp://HOST:PORT or rsocket+ws://HOST:PORT/PATH.
const RSocketScheme = "rsocket+"

// maxRecvBytes bounds one frame from the sink: acks and credits are
// small, this only guards against a broken peer.
const maxRecvBytes = 8 << 20

// sinkDialers returns one dialer per sink of cfg.SinkAddr, the addresses
// for logs, and the transport connections to close at the end. With
// cfg.Dialer every attempt uses it (tests, the simulation); otherwise each
// address gets a gRPC connection with the agent's keepalive: pings after
// KeepaliveTime of silence, and a ping unanswered for KeepaliveTimeout
// breaks the session, so the agent reconnects (to the next sink, if
// several). Pings go only while a session is open: the agent always has
// one when connected, and the sink may refuse pings without sessions.
// An address with RSocketScheme gets an RSocket connection instead, with
// the same TLS, token and keepalive (RSocket KEEPALIVE frames; silence for
// KeepaliveTime+KeepaliveTimeout breaks the connection). gRPC and RSocket
// sinks may be mixed in one list.
func sinkDialers(cfg Config) ([]protocol.Dialer, []string, []io.Closer, error) {
	var addrs []string
	for _, a := range strings.Split(cfg.SinkAddr, ",") {
		addrs = append(addrs, strings.TrimSpace(a))
	}
	if cfg.Dialer != nil {
		ds := make([]protocol.Dialer, len(addrs))
		for i := range ds {
			ds[i] = cfg.Dialer
		}
		return ds, addrs, nil, nil
	}
	o := cfg.GRPC
	o.KeepaliveTime = KeepaliveTime
	o.ReconnectMax = cfg.ReconnectMax
	o.KeepaliveTimeout = orDefault(cfg.KeepaliveTimeout, DefaultKeepaliveTimeout)
	if o.MaxRecvBytes == 0 {
		o.MaxRecvBytes = maxRecvBytes
	}
	var ds []protocol.Dialer
	var closers []io.Closer
	for _, addr := range addrs {
		if u, ok := strings.CutPrefix(addr, RSocketScheme); ok {
			d, err := rsocketDialer(u, o, cfg.RSocketResume)
			if err != nil {
				for _, c := range closers {
					c.Close()
				}
				return nil, nil, nil, fmt.Errorf("agent: %w", err)
			}
			ds, closers = append(ds, d), append(closers, d)
			continue
		}
		d, c, err := grpctransport.Connect(addr, o)
		if err != nil {
			for _, c := range closers {
				c.Close()
			}
			return nil, nil, nil, fmt.Errorf("agent: %w", err)
		}
		ds, closers = append(ds, d), append(closers, c)
	}
	return ds, addrs, closers, nil
}

// rsocketDialer is the RSocket dialer for url with the client settings of o.
func rsocketDialer(url string, o grpctransport.ClientOptions, resume bool) (*rsockettransport.Dialer, error) {
	opts := []rsockettransport.Option{rsockettransport.WithKeepalive(o.KeepaliveTime, o.KeepaliveTime+o.KeepaliveTimeout)}
	if resume {
		opts = append(opts, rsockettransport.WithResume())
	}
	if o.TLS != nil {
		opts = append(opts, rsockettransport.WithTLS(o.TLS))
	}
	if o.Token != "" {
		opts = append(opts, rsockettransport.WithToken(o.Token))
	}
	if o.AllowTokenWithoutTLS {
		opts = append(opts, rsockettransport.AllowTokenWithoutTLS())
	}
	return rsockettransport.NewDialer(url, opts...)
}
