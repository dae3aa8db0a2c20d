package xfer

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	xferv1 "github.com/sluicehq/sluice/api/xfer/v1"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
)

// MaxChunk is the largest chunk a client sends (and gRPC's message limit
// is set above it).
const MaxChunk = 8 << 20

var grpcCodes = map[Code]codes.Code{
	CodeBadName: codes.InvalidArgument, CodeBusy: codes.AlreadyExists, CodeTooLarge: codes.OutOfRange,
	CodeNoSpace: codes.ResourceExhausted, CodeOffset: codes.FailedPrecondition, CodeChecksum: codes.DataLoss,
	CodeOverSize: codes.InvalidArgument, CodeIncomplete: codes.FailedPrecondition, CodeNotFound: codes.NotFound,
	CodeInternal: codes.Internal,
}

// toStatus turns a store error into a gRPC status (the code rides in the
// message too, so the client recovers it exactly).
func toStatus(err error) error {
	c := CodeOf(err)
	return status.Error(grpcCodes[c], encodeRemote(err))
}

// fromStatus turns a gRPC error into a *RemoteError when it is a refusal
// of ours, else returns it (a transport failure).
func fromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	if st.Code() != codes.Unavailable && st.Code() != codes.Canceled && ourMessage(st.Message()) {
		return decodeRemote(st.Message())
	}
	switch st.Code() {
	case codes.Unimplemented, codes.Unauthenticated, codes.PermissionDenied:
		// Not an xfer server, or credentials: no retry helps.
		return &permanentError{err}
	}
	return err
}

// GRPCService serves a Backend as the xfer.v1.Xfer gRPC service.
type GRPCService struct {
	xferv1.UnimplementedXferServer
	Store Backend
}

// RegisterGRPC registers the service on srv.
func RegisterGRPC(srv *grpc.Server, s Backend) {
	xferv1.RegisterXferServer(srv, &GRPCService{Store: s})
}

// grpcServerOptions: a connection that completes no HTTP/2 handshake
// (silent, or stopped in its preface) is closed after the handshake
// timeout, or idle if shorter (gRPC's default is 120 s); one that sends
// nothing is pinged after grpcKeepalive.Time, or idle if shorter, and
// closed when the answer does not come within grpcKeepalive.Timeout, or
// idle if shorter. With the default idle (60 s) that is grpcKeepalive.
func grpcServerOptions(idle time.Duration) []grpc.ServerOption {
	ka := grpcKeepalive
	ka.Time, ka.Timeout = min(ka.Time, idle), min(ka.Timeout, idle)
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxChunk + 1<<16),
		grpc.InitialWindowSize(grpcWindow), grpc.InitialConnWindowSize(grpcWindow),
		grpc.ReadBufferSize(grpcIOBuf), grpc.WriteBufferSize(grpcIOBuf),
		grpc.KeepaliveParams(ka),
		grpc.ConnectionTimeout(min(defaults.ListenerHandshakeTimeout, idle)),
		// Each stream is a handler waiting for its first chunk; gRPC's
		// default is no limit at all.
		grpc.MaxConcurrentStreams(grpcMaxStreams)}
}

// grpcMaxStreams bounds the streams (uploads, offset queries) one
// connection has open at once.
const grpcMaxStreams = 256

// grpcKeepalive: the server pings a connection that sent nothing for
// Time and drops it when no answer comes within Timeout. A client frozen
// mid-upload, or gone without a FIN, would otherwise hold its upload
// (Begin refuses the name meanwhile) until TCP gave up: minutes, or never
// for a stopped process whose kernel still answers. A slow client is not
// dropped: its HTTP/2 stack answers pings while a chunk trickles in.
// (RSocket has this built in: the client's KEEPALIVEs and max lifetime.)
var grpcKeepalive = keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 20 * time.Second}

// grpc-go starts a stream with a 64 KiB flow-control window and grows it
// by BDP pings; a bulk upload waited on window updates most of the time
// (about 0.5 GB/s at 1 MiB chunks here, with the CPUs half idle). A fixed
// window of a few chunks keeps the pipe full; the I/O buffers cut the
// syscalls per chunk.
const (
	grpcWindow = 8 << 20
	grpcIOBuf  = 256 << 10
)

func (g *GRPCService) Offset(_ context.Context, req *xferv1.OffsetRequest) (*xferv1.OffsetResponse, error) {
	if err := ValidateName(req.GetName()); err != nil {
		return nil, toStatus(err)
	}
	in, err := g.Store.Stat(req.GetName())
	if errors.Is(err, ErrNotFound) {
		return &xferv1.OffsetResponse{}, nil
	}
	return &xferv1.OffsetResponse{Offset: in.Offset, Size: in.Size, Exists: true}, nil
}

func (g *GRPCService) Upload(stream xferv1.Xfer_UploadServer) error {
	m, err := stream.Recv()
	if err != nil {
		return err
	}
	b := m.GetBegin()
	if b == nil {
		return status.Error(codes.InvalidArgument, "the first message must be Begin")
	}
	var sha []byte
	if len(b.GetSha256()) > 0 {
		sha = b.GetSha256()
	}
	u, err := g.Store.Begin(b.GetName(), b.GetSize(), sha, "", false)
	if err != nil {
		return toStatus(err)
	}
	defer u.Release()
	off := b.GetOffset()
	if have := u.Offset(); off != have {
		return toStatus(&OffsetError{Want: off, Have: have})
	}
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return toStatus(ErrIncomplete)
		}
		if err != nil {
			return err // the client went away; Release saves what arrived
		}
		switch x := m.GetMsg().(type) {
		case *xferv1.UploadRequest_Chunk:
			n, err := u.Write(off, x.Chunk.GetData(), x.Chunk.GetCrc32C())
			if err != nil {
				return toStatus(err)
			}
			off = n
		case *xferv1.UploadRequest_Finish:
			var want []byte
			if len(x.Finish.GetSha256()) > 0 {
				want = x.Finish.GetSha256()
			}
			sum, err := u.Finish(want, "grpc")
			if err != nil {
				return toStatus(err)
			}
			return stream.SendAndClose(&xferv1.UploadResponse{Size: off, Sha256: sum})
		default:
			return status.Error(codes.InvalidArgument, "Begin sent twice")
		}
	}
}

// grpcSender is the gRPC client side of Send.
type grpcSender struct {
	addr string
	cc   *grpc.ClientConn
	c    xferv1.XferClient
}

func dialGRPC(addr string) (*grpcSender, error) {
	g := &grpcSender{addr: addr}
	return g, g.dial()
}

// reset replaces the connection: grpc-go's reconnect backoff grows to
// minutes, longer than a restarting server needs.
func (g *grpcSender) reset() {
	old := g.cc
	if err := g.dial(); err == nil {
		old.Close()
	}
}

func (g *grpcSender) dial() error {
	cc, err := grpc.NewClient(g.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(MaxChunk+1<<16)),
		grpc.WithInitialWindowSize(grpcWindow), grpc.WithInitialConnWindowSize(grpcWindow),
		grpc.WithReadBufferSize(grpcIOBuf), grpc.WithWriteBufferSize(grpcIOBuf),
		grpc.WithConnectParams(grpctransport.ConnectParams(maxBackoff)))
	if err != nil {
		return err
	}
	g.cc, g.c = cc, xferv1.NewXferClient(cc)
	return nil
}

func (g *grpcSender) Close() error { return g.cc.Close() }

func (g *grpcSender) offset(ctx context.Context, name string) (int64, int64, bool, error) {
	r, err := g.c.Offset(ctx, &xferv1.OffsetRequest{Name: name})
	if err != nil {
		return 0, 0, false, fromStatus(err)
	}
	return r.GetOffset(), r.GetSize(), r.GetExists(), nil
}

func (g *grpcSender) send(ctx context.Context, j *job) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := g.c.Upload(ctx)
	if err != nil {
		return nil, fromStatus(err)
	}
	// A refusal ends the stream; the next Send fails with io.EOF and
	// CloseAndRecv has the status.
	fail := func(err error) ([]byte, error) {
		if err == io.EOF {
			_, err = st.CloseAndRecv()
		}
		return nil, fromStatus(err)
	}
	if err := st.Send(&xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Begin{Begin: &xferv1.Begin{Name: j.name, Size: j.size, Offset: j.from}}}); err != nil {
		return fail(err)
	}
	chunk := &xferv1.Chunk{}
	msg := &xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Chunk{Chunk: chunk}}
	err = j.chunks(func(off int64, p []byte, crc uint32) error {
		chunk.Data, chunk.Crc32C = p, crc
		return st.Send(msg) // encodes p before returning, so the buffer may be reused
	})
	if err != nil {
		var pe *permanentError
		if errors.As(err, &pe) {
			return nil, err
		}
		return fail(err)
	}
	sum := j.sum()
	if err := st.Send(&xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Finish{Finish: &xferv1.Finish{Sha256: sum}}}); err != nil {
		return fail(err)
	}
	r, err := st.CloseAndRecv()
	if err != nil {
		return nil, fromStatus(err)
	}
	return r.GetSha256(), nil
}
