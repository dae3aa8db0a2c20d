// Package grpcserve serves a protocol.Service over gRPC: the server's
// windows, message limits, keepalive, handshake timeout, TLS and token
// interceptors, the per-connection stream cap watch (streamcap.go) and the
// HTTP/2 stall watch (stall.go), all configured by a serving.Host. The
// protocol itself (frames, statuses) is the parent package's; what the
// service does with its sessions is the service's (internal/sink).
package grpcserve

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/tap"

	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
	"github.com/sluicehq/sluice/internal/transport/grpctransport/firstmsg"
	"github.com/sluicehq/sluice/internal/transport/serving"
	"github.com/sluicehq/sluice/internal/wire"
)

// Server is a gRPC server carrying one Host's service.
type Server struct {
	h   serving.Host
	srv *grpc.Server

	// stalls is the stall watch (stall.go) of the server's connections.
	stalls    *StallWatch
	watchOnce sync.Once
}

// Serve serves h's service on lis until h's service closes (it stops the
// server: serving.Host.Attach). It returns nil then, or the listener's
// error.
func Serve(h serving.Host, lis net.Listener) error {
	return New(h).Serve(lis)
}

// New builds the gRPC server for h: windows, limits, keepalive, TLS with
// the stall watch, token authentication.
func New(h serving.Host) *Server {
	s := &Server{h: h, stalls: NewStallWatch(StallOptions{Timeout: h.StallTimeout,
		Tick: h.StallTick, Now: h.StallNow, Checked: h.StallChecked,
		OnStall: func(peer string, held int64) {
			h.StalledConns.Inc()
			h.Logger.Warn("sink: a client began a message and stopped sending it; closing its connection",
				"peer", peer, "held_bytes", held, "stall_timeout", h.StallTimeout)
		}})}
	sopts := []grpc.ServerOption{
		// HTTP/2 flow control caps a stream at window ÷ RTT: gRPC's
		// default 64 KiB would cap a 150 ms link at 430 KB/s, and even its
		// dynamic (BDP) window stops at 16 MiB, 110 MB/s at 150 ms. The
		// stream window is at least the default byte credit, so credits,
		// not HTTP/2, bound what is in flight.
		grpc.InitialWindowSize(wire.InitialWindowSize),
		grpc.InitialConnWindowSize(wire.InitialConnWindowSize),
		// A message being received is buffered whole: keep the limit at
		// the largest Request a well-behaved agent sends, so that half a
		// message cannot hold more.
		grpc.MaxRecvMsgSize(maxRequestBytes(h.MaxMessageBytes)),
		grpc.MaxConcurrentStreams(uint32(h.MaxStreamsPerConn)),
		grpc.StatsHandler(&streamCapWatch{h: &s.h, max: int64(h.MaxStreamsPerConn)}),
		grpc.MaxSendMsgSize(int(h.MaxMessageBytesLimit) + (1 << 20)),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: h.KeepaliveTime, Timeout: h.KeepaliveTimeout}),
		grpc.ConnectionTimeout(h.HandshakeTimeout),
		grpc.KeepaliveEnforcementPolicy(serverKeepalivePolicy),
		grpc.WaitForHandlers(true),
		experimental.BufferPool(grpctransport.ServerBufferPool()),
		grpc.ForceServerCodecV2(grpctransport.ServerCodec()),
	}
	if h.TLS != nil {
		// The stall watch follows the decrypted HTTP/2 (without TLS, the
		// listener wraps each connection: limitListener).
		sopts = append(sopts, grpc.Creds(s.stalls.Creds(credentials.NewTLS(h.TLS))))
	}
	// First in the interceptor chain: a Send refused by the token check
	// is counted out of the waiting streams too.
	wl := s.waitingLimit()
	sopts = append(sopts, grpc.InTapHandle(s.tap(wl)), grpc.ChainStreamInterceptor(wl.StreamInterceptor))
	if h.Tokens != nil {
		sopts = append(sopts, grpc.ChainStreamInterceptor(grpctransport.TokenStreamInterceptor(h.Tokens)),
			grpc.ChainUnaryInterceptor(grpctransport.TokenUnaryInterceptor(h.Tokens)))
	}
	s.srv = grpc.NewServer(sopts...)
	grpctransport.Register(s.srv, h.Service)
	return s
}

// waitingLimit bounds the Send streams of one connection that wait for
// their Hello (internal/firstmsg): an agent opens one and sends its Hello
// at once; a client opening Sends and sending nothing had the sink run a
// goroutine for each, 16,384 of them from one address (64 connections ×
// 256 streams), whose records the Go runtime keeps after they end.
func (s *Server) waitingLimit() *firstmsg.Limit {
	return firstmsg.New(firstmsg.Config{Methods: []string{grpctransport.SendMethod},
		Refused: func() {
			if s.h.WaitingRefused != nil {
				s.h.WaitingRefused.Inc()
			}
		},
		Logger:  s.h.Logger,
		Warning: "sink: a connection opened more Send streams than it sent Hellos; refusing the new ones"})
}

// tap refuses a Read stream that the service would refuse
// (serving.Host.ConsumerRefusal) before gRPC starts a handler goroutine
// for it, then applies wl's tap. gRPC answers a refusal in the tap with
// its status and no handler; like wl's refusals, these count towards
// the 50 queued responses past which gRPC stops reading a connection
// that does not read.
func (s *Server) tap(wl *firstmsg.Limit) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if info.FullMethodName == grpctransport.ReadMethod && s.h.ConsumerRefusal != nil {
			if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
				if err := s.h.ConsumerRefusal(p.Addr.String()); err != nil {
					return nil, grpctransport.StatusError(err)
				}
			}
		}
		return wl.Tap(ctx, info)
	}
}

// serverKeepalivePolicy lets clients ping as often as every MinTime, with
// or without a stream. gRPC clients cannot ping more often than every 10 s
// (their minimum keepalive time); a MinTime of half that leaves room for
// timer jitter, so an agent pinging every 10 s is never cut with
// GOAWAY "too_many_pings".
var serverKeepalivePolicy = keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}

// Serve accepts connections on lis until the service closes. It returns
// nil then.
func (s *Server) Serve(lis net.Listener) error {
	if err := s.h.Attach(s); err != nil {
		lis.Close()
		return nil
	}
	if !s.h.Authenticated && !isLoopback(lis.Addr()) {
		s.h.Logger.Warn("sink: NO AUTHENTICATION on a non-loopback address: anyone who reaches it may send as any agent "+
			"(and have that agent's later messages dropped as duplicates) and read every record; "+
			"configure tokens (--tokens) or mutual TLS (--client-ca)", "addr", lis.Addr().String())
	}
	s.watchOnce.Do(func() { go s.stalls.Run(s.h.Closing) })
	err := s.srv.Serve(s.stalls.Listener(&limitListener{Listener: lis, s: s}, s.h.TLS == nil))
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// GracefulStop stops accepting connections and waits for the streams to
// end (serving.Stopper).
func (s *Server) GracefulStop() { s.srv.GracefulStop() }

// Stop closes every connection (serving.Stopper).
func (s *Server) Stop() { s.srv.Stop() }

// requestFraming is what a Request holds beyond its payload (version,
// message id, record count, field tags and lengths) with room to spare,
// and what zstd may add to an incompressible batch.
const requestFraming = 64 << 10

// maxRequestBytes is the gRPC receive limit: the largest payload (a batch
// of maxMessage bytes, or a dictionary upload, which
// codec.ParseDictionary takes up to MaxDictionarySize + 64 KiB) plus
// framing.
func maxRequestBytes(maxMessage int64) int {
	return int(max(maxMessage, codec.MaxDictionarySize+64<<10)) + requestFraming
}

// isLoopback reports whether addr is a loopback address (127.0.0.0/8,
// ::1); an unspecified address (0.0.0.0, ::) listens on every interface.
func isLoopback(addr net.Addr) bool {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.IsLoopback()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback() || host == "localhost"
}

// limitListener admits each accepted connection through the host's
// connection caps (serving.Host.Admit), closing the ones over them at
// once.
type limitListener struct {
	net.Listener
	s *Server
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ac, ok := l.s.h.Admit(c)
		if !ok {
			c.Close()
			continue
		}
		return ac, nil
	}
}

// hookConn runs onClose, if set, on its first Close.
type hookConn struct {
	net.Conn
	once    sync.Once
	onClose func()
}

func (c *hookConn) Close() error {
	c.once.Do(func() {
		if c.onClose != nil {
			c.onClose()
		}
	})
	return c.Conn.Close()
}
