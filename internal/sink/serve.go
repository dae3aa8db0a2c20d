package sink

import (
	"errors"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"

	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
	"github.com/sluicehq/sluice/internal/wire"
)

// newGRPCServer builds the gRPC server that carries the sink's
// protocol.Service: windows, limits, keepalive, TLS with the stall watch,
// token authentication. The protocol itself (frames, statuses) is
// internal/transport/grpctransport's; nothing else of the sink knows gRPC.
func (s *Sink) newGRPCServer() *grpc.Server {
	cfg := &s.cfg
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
		grpc.MaxRecvMsgSize(maxRequestBytes(cfg.MaxMessageBytes)),
		grpc.MaxConcurrentStreams(uint32(cfg.MaxStreamsPerConn)),
		grpc.StatsHandler(&streamCapWatch{s: s, max: int64(cfg.MaxStreamsPerConn)}),
		grpc.MaxSendMsgSize(MaxMessageBytesLimit + (1 << 20)),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout}),
		grpc.ConnectionTimeout(cfg.HandshakeTimeout),
		grpc.KeepaliveEnforcementPolicy(serverKeepalivePolicy),
		grpc.WaitForHandlers(true),
		experimental.BufferPool(grpctransport.ServerBufferPool()),
		grpc.ForceServerCodecV2(grpctransport.ServerCodec()),
	}
	if cfg.TLS != nil {
		// The stall watch follows the decrypted HTTP/2 (without TLS, the
		// listener wraps each connection: peerLimitListener).
		sopts = append(sopts, grpc.Creds(stallCreds{TransportCredentials: credentials.NewTLS(cfg.TLS), s: s}))
	}
	if cfg.Tokens != nil {
		sopts = append(sopts, grpc.ChainStreamInterceptor(cfg.Tokens.StreamInterceptor()),
			grpc.ChainUnaryInterceptor(cfg.Tokens.UnaryInterceptor()))
	}
	srv := grpc.NewServer(sopts...)
	grpctransport.Register(srv, s)
	return srv
}

// serverKeepalive (the default of Config.KeepaliveTime and
// KeepaliveTimeout) makes the sink ping a connection that has been quiet for
// Time and close it when the ping is not answered within Timeout, so a
// half-open agent (host gone, NAT entry dropped) is detected within about
// 40 s and its stream ends instead of holding its queue forever.
var serverKeepalive = keepalive.ServerParameters{Time: defaults.SinkKeepaliveTime, Timeout: defaults.SinkKeepaliveTimeout}

// serverKeepalivePolicy lets clients ping as often as every MinTime, with
// or without a stream. gRPC clients cannot ping more often than every 10 s
// (their minimum keepalive time); a MinTime of half that leaves room for
// timer jitter, so an agent pinging every 10 s is never cut with
// GOAWAY "too_many_pings".
var serverKeepalivePolicy = keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}

// Serve accepts connections on lis until Close. It returns nil after Close.
func (s *Sink) Serve(lis net.Listener) error {
	select {
	case <-s.closing:
		lis.Close()
		return nil
	default:
	}
	if !s.authEnabled() && !isLoopback(lis.Addr()) {
		s.log.Warn("sink: NO AUTHENTICATION on a non-loopback address: anyone who reaches it may send as any agent "+
			"(and have that agent's later messages dropped as duplicates) and read every record; "+
			"configure tokens (--tokens) or mutual TLS (--client-ca)", "addr", lis.Addr().String())
	}
	err := s.srv.Serve(newPeerLimitListener(s, lis))
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

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
