// Package grpcxfer is file transfer over gRPC (the xfer.v1.Xfer service):
// its server adapter over an xfer.Backend, and its client for the upload
// loop of internal/xfer/send.
package grpcxfer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	xferv1 "github.com/sluicehq/sluice/api/xfer/v1"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/transport/grpctransport/firstmsg"
	"github.com/sluicehq/sluice/internal/xfer"
)

var grpcCodes = map[xfer.Code]codes.Code{
	xfer.CodeBadName: codes.InvalidArgument, xfer.CodeBusy: codes.AlreadyExists, xfer.CodeTooLarge: codes.OutOfRange,
	xfer.CodeNoSpace: codes.ResourceExhausted, xfer.CodeOffset: codes.FailedPrecondition, xfer.CodeChecksum: codes.DataLoss,
	xfer.CodeOverSize: codes.InvalidArgument, xfer.CodeIncomplete: codes.FailedPrecondition, xfer.CodeNotFound: codes.NotFound,
	xfer.CodeInternal: codes.Internal,
}

// toStatus turns a store error into a gRPC status (the code rides in the
// message too, so the client recovers it exactly).
func toStatus(err error) error {
	c := xfer.CodeOf(err)
	return status.Error(grpcCodes[c], xfer.EncodeRemote(err))
}

// Service serves an xfer.Backend as the xfer.v1.Xfer gRPC service.
type Service struct {
	xferv1.UnimplementedXferServer
	Store xfer.Backend
}

// Register registers the service of s on srv.
func Register(srv *grpc.Server, s xfer.Backend) {
	xferv1.RegisterXferServer(srv, &Service{Store: s})
}

// ServerOptions are a server's options for the service: a connection
// that completes no HTTP/2 handshake (silent, or stopped in its
// preface) is closed after the handshake timeout, or idle if shorter
// (gRPC's default is 120 s); one that sends nothing is pinged after
// grpcKeepalive.Time, or idle if shorter, and closed when the answer
// does not come within grpcKeepalive.Timeout, or idle if shorter. With
// the default idle (60 s) that is grpcKeepalive. log, when not nil, gets
// a warning (once a minute) when a connection's streams are refused.
func ServerOptions(idle time.Duration, log *slog.Logger) []grpc.ServerOption {
	ka := grpcKeepalive
	ka.Time, ka.Timeout = min(ka.Time, idle), min(ka.Timeout, idle)
	// A client opening Uploads and sending no Begin had a goroutine run
	// for each (25,600 from 100 connections), whose records the Go
	// runtime keeps after they end: at most firstmsg.DefaultMax wait per
	// connection.
	waiting := firstmsg.New(firstmsg.Config{Methods: []string{xferv1.Xfer_Upload_FullMethodName},
		Logger: log, Warning: "xfer: a connection opened more uploads than it began; refusing the new ones"})
	return append(waiting.ServerOptions(), grpc.MaxRecvMsgSize(xfer.MaxChunk+1<<16), grpc.ForceServerCodecV2(newCodec()),
		experimental.BufferPool(sharedPool),
		grpc.InitialWindowSize(grpcWindow), grpc.InitialConnWindowSize(grpcWindow),
		grpc.ReadBufferSize(grpcIOBuf), grpc.WriteBufferSize(grpcIOBuf),
		grpc.KeepaliveParams(ka),
		grpc.ConnectionTimeout(min(defaults.ListenerHandshakeTimeout, idle)),
		// Each stream is a handler waiting for its first chunk; gRPC's
		// default is no limit at all.
		grpc.MaxConcurrentStreams(grpcMaxStreams))
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

func (g *Service) Offset(_ context.Context, req *xferv1.OffsetRequest) (*xferv1.OffsetResponse, error) {
	if err := xfer.ValidateName(req.GetName()); err != nil {
		return nil, toStatus(err)
	}
	in, err := g.Store.Stat(req.GetName())
	if errors.Is(err, xfer.ErrNotFound) {
		return &xferv1.OffsetResponse{}, nil
	}
	return &xferv1.OffsetResponse{Offset: in.Offset, Size: in.Size, Exists: true}, nil
}

func (g *Service) Upload(stream xferv1.Xfer_UploadServer) error {
	var m request // read through codec: a chunk's bytes stay in gRPC's frames
	defer m.release()
	if err := stream.RecvMsg(&m); err != nil {
		return err
	}
	b := m.msg.GetBegin()
	if m.isChunk || b == nil {
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
		return toStatus(&xfer.OffsetError{Want: off, Have: have})
	}
	for {
		err := stream.RecvMsg(&m)
		if err == io.EOF {
			return toStatus(xfer.ErrIncomplete)
		}
		if err != nil {
			return err // the client went away; Release saves what arrived
		}
		if m.isChunk {
			n, err := writeChunk(u, off, &m)
			m.release() // the store copied the chunk: hold no buffer while the next one comes
			if err != nil {
				return toStatus(err)
			}
			off = n
			continue
		}
		switch x := m.msg.GetMsg().(type) {
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

// writeChunk gives the store the chunk of m: in the pieces it came in
// when the store takes them (one copy of each byte, into the store's
// blocks), else gathered into one slice first.
func writeChunk(u xfer.BackendUpload, off int64, m *request) (int64, error) {
	if pw, ok := u.(xfer.PieceWriter); ok {
		return pw.WritePieces(off, m.pieces, m.crc)
	}
	return u.Write(off, m.gathered(), m.crc)
}
