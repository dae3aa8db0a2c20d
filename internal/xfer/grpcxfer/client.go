package grpcxfer

import (
	"context"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"

	xferv1 "github.com/sluicehq/sluice/api/xfer/v1"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
	"github.com/sluicehq/sluice/internal/xfer"
)

// fromStatus turns a gRPC error into a *xfer.RemoteError when it is a refusal
// of ours, else returns it (a transport failure).
func fromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	if st.Code() != codes.Unavailable && st.Code() != codes.Canceled && xfer.OurMessage(st.Message()) {
		return xfer.DecodeRemote(st.Message())
	}
	switch st.Code() {
	case codes.Unimplemented, codes.Unauthenticated, codes.PermissionDenied:
		// Not an xfer server, or credentials: no retry helps.
		return xfer.Permanent(err)
	}
	return err
}

// Client is the gRPC client of the upload loop (an xfer.Transport).
type Client struct {
	addr string
	cc   *grpc.ClientConn
	c    xferv1.XferClient
}

// Dial makes a client of the server at addr (HOST:PORT); it connects on
// first use.
func Dial(addr string) (*Client, error) {
	g := &Client{addr: addr}
	return g, g.dial()
}

// Reset replaces the connection: grpc-go's reconnect backoff grows to
// minutes, longer than a restarting server needs.
func (g *Client) Reset() {
	old := g.cc
	if err := g.dial(); err == nil {
		old.Close()
	}
}

func (g *Client) dial() error {
	cc, err := grpc.NewClient(g.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(xfer.MaxChunk+1<<16), grpc.ForceCodecV2(newCodec())),
		grpc.WithInitialWindowSize(grpcWindow), grpc.WithInitialConnWindowSize(grpcWindow),
		grpc.WithReadBufferSize(grpcIOBuf), grpc.WithWriteBufferSize(grpcIOBuf),
		experimental.WithBufferPool(sharedPool),
		grpc.WithConnectParams(grpctransport.ConnectParams(xfer.MaxBackoff)))
	if err != nil {
		return err
	}
	g.cc, g.c = cc, xferv1.NewXferClient(cc)
	return nil
}

// Close closes the connection.
func (g *Client) Close() error { return g.cc.Close() }

// Offset asks the server's offset and size for name.
func (g *Client) Offset(ctx context.Context, name string) (int64, int64, bool, error) {
	r, err := g.c.Offset(ctx, &xferv1.OffsetRequest{Name: name})
	if err != nil {
		return 0, 0, false, fromStatus(err)
	}
	return r.GetOffset(), r.GetSize(), r.GetExists(), nil
}

// Begin opens an Upload stream and sends its Begin.
func (g *Client) Begin(ctx context.Context, out xfer.Outgoing) (xfer.Stream, error) {
	ctx, cancel := context.WithCancel(ctx)
	st, err := g.c.Upload(ctx)
	if err != nil {
		cancel()
		return nil, fromStatus(err)
	}
	u := &upload{st: st, cancel: cancel, chunk: &xferv1.Chunk{}}
	u.msg = &xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Chunk{Chunk: u.chunk}}
	begin := &xferv1.Begin{Name: out.Name, Size: out.Size, Offset: out.From}
	if err := st.Send(&xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Begin{Begin: begin}}); err != nil {
		cancel()
		return nil, u.Cause(err)
	}
	return u, nil
}

// upload is one Upload stream.
type upload struct {
	st     xferv1.Xfer_UploadClient
	cancel context.CancelFunc
	chunk  *xferv1.Chunk
	msg    *xferv1.UploadRequest // carries chunk
}

func (u *upload) Chunk(c xfer.Chunk) error {
	u.chunk.Data, u.chunk.Crc32C = c.Data, c.CRC32C
	return u.st.Send(u.msg) // encodes Data before returning, so the buffer may be reused
}

// Cause: a refusal ends the stream; the next Send fails with io.EOF and
// CloseAndRecv has the status.
func (u *upload) Cause(err error) error {
	if err == io.EOF {
		_, err = u.st.CloseAndRecv()
	}
	return fromStatus(err)
}

func (u *upload) Finish(sum []byte) ([]byte, error) {
	if err := u.st.Send(&xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Finish{Finish: &xferv1.Finish{Sha256: sum}}}); err != nil {
		return nil, u.Cause(err)
	}
	r, err := u.st.CloseAndRecv()
	if err != nil {
		return nil, fromStatus(err)
	}
	return r.GetSha256(), nil
}

func (u *upload) Close() { u.cancel() }
