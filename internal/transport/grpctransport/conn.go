package grpctransport

import (
	"context"
	"crypto/tls"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/protocol"
)

// Dialer opens protocol sessions over a gRPC client connection (which the
// caller dials with its credentials, windows and keepalive).
type Dialer struct {
	client sluicev1.SinkClient
}

// NewDialer wraps cc.
func NewDialer(cc grpc.ClientConnInterface) *Dialer {
	return &Dialer{client: sluicev1.NewSinkClient(cc)}
}

// Send opens a Send session; ctx bounds its life (cancel it to end it).
func (d *Dialer) Send(ctx context.Context) (protocol.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	st, err := d.client.Send(ctx, grpc.ForceCodecV2(clientCodec{}))
	if err != nil {
		cancel()
		return nil, SessionError(err)
	}
	return &sendClient{stream: st, ctx: ctx, cancel: cancel, end: newEndStatus()}, nil
}

// Read opens a Read session.
func (d *Dialer) Read(ctx context.Context) (protocol.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	st, err := d.client.Read(ctx)
	if err != nil {
		cancel()
		return nil, SessionError(err)
	}
	return &readClient{stream: st, ctx: ctx, cancel: cancel, end: newEndStatus()}, nil
}

// sendClient is the agent's end of a Send session.
type sendClient struct {
	stream  sluicev1.Sink_SendClient
	ctx     context.Context
	cancel  context.CancelFunc
	req     sluicev1.Request // reused: Send marshals before returning
	owned   ownedRequest     // reused likewise, by SendOwned
	pending []protocol.Frame // frames of the last Response not yet returned
	end     *endStatus       // the status the stream ended with, for Send
}

func (c *sendClient) Send(f protocol.Frame) error {
	if err := RequestFromFrame(&c.req, f); err != nil {
		return err
	}
	err := c.stream.Send(&c.req)
	if err == io.EOF {
		// io.EOF from Send means the stream has ended; its real status
		// (PermissionDenied from the sink, say) is what Recv returns.
		err = afterSendEOF(c.ctx, c.end, c.stream.Recv)
	}
	return SessionError(err)
}

// SendOwned is Send of a Message whose payload aliases rec, which the
// caller hands over: put(rec) is called once gRPC no longer reads it
// (after writing it to the socket, or when the stream is gone), so the
// payload is not copied into a marshalled message (ClientCodec). If Send
// never reaches the codec (the stream already closed) put is not called
// and rec is left to the garbage collector.
func (c *sendClient) SendOwned(m *protocol.Message, rec *[]byte, put func(*[]byte)) error {
	if err := RequestFromFrame(&c.req, m); err != nil {
		put(rec)
		return err
	}
	c.owned = ownedRequest{req: &c.req, rec: rec, put: put}
	err := c.stream.SendMsg(&c.owned)
	c.owned = ownedRequest{}
	if err == io.EOF {
		err = afterSendEOF(c.ctx, c.end, c.stream.Recv)
	}
	return SessionError(err)
}

func (c *sendClient) Recv() (protocol.Frame, error) {
	for len(c.pending) == 0 {
		resp, err := recv(c.end, c.stream.Recv)
		if err != nil {
			return nil, SessionError(err)
		}
		c.pending = FramesFromResponse(c.pending[:0], resp)
	}
	f := c.pending[0]
	c.pending = c.pending[1:]
	return f, nil
}

func (c *sendClient) CloseSend() error         { return c.stream.CloseSend() }
func (c *sendClient) Close(error)              { c.cancel() }
func (c *sendClient) Context() context.Context { return c.ctx }
func (c *sendClient) Peer() protocol.PeerInfo  { return peerInfo(c.stream.Context()) }

// readClient is a consumer's end of a Read session.
type readClient struct {
	stream sluicev1.Sink_ReadClient
	ctx    context.Context
	cancel context.CancelFunc
	end    *endStatus // the status the stream ended with, for Send
}

func (c *readClient) Send(f protocol.Frame) error {
	req, err := ReadRequestFromFrame(f)
	if err != nil {
		return err
	}
	err = c.stream.Send(req)
	if err == io.EOF {
		err = afterSendEOF(c.ctx, c.end, c.stream.Recv)
	}
	return SessionError(err)
}

func (c *readClient) Recv() (protocol.Frame, error) {
	resp, err := recv(c.end, c.stream.Recv)
	if err != nil {
		return nil, SessionError(err)
	}
	return FrameFromReadResponse(resp)
}

func (c *readClient) CloseSend() error         { return c.stream.CloseSend() }
func (c *readClient) Close(error)              { c.cancel() }
func (c *readClient) Context() context.Context { return c.ctx }
func (c *readClient) Peer() protocol.PeerInfo  { return peerInfo(c.stream.Context()) }

// SendMethod is the full gRPC method name of an agent's Send stream.
const SendMethod = sluicev1.Sink_Send_FullMethodName

// ReadMethod is the full name of the consumers' Read stream.
const ReadMethod = sluicev1.Sink_Read_FullMethodName

// Register serves svc as the Sink service of s.
func Register(s *grpc.Server, svc protocol.Service) {
	sluicev1.RegisterSinkServer(s, &server{svc: svc})
}

type server struct {
	sluicev1.UnimplementedSinkServer
	svc protocol.Service
}

func (s *server) Send(st grpc.BidiStreamingServer[sluicev1.Request, sluicev1.Response]) error {
	c := &sendServer{stream: st}
	c.ctx, c.cancel = context.WithCancelCause(st.Context())
	defer c.cancel(nil)
	return StatusError(s.svc.ServeSend(c))
}

func (s *server) Read(st grpc.BidiStreamingServer[sluicev1.ReadRequest, sluicev1.ReadResponse]) error {
	c := &readServer{stream: st}
	c.ctx, c.cancel = context.WithCancelCause(st.Context())
	defer c.cancel(nil)
	return StatusError(s.svc.ServeRead(c))
}

// serverEnd is what both server-side sessions share: ending a session
// from the handler's side is returning from the handler; Close cancels
// the context the handler watches.
type serverEnd struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func (e *serverEnd) CloseSend() error         { return nil } // the handler's return ends the stream
func (e *serverEnd) Close(err error)          { e.cancel(err) }
func (e *serverEnd) Context() context.Context { return e.ctx }

type sendServer struct {
	serverEnd
	stream grpc.BidiStreamingServer[sluicev1.Request, sluicev1.Response]
	// req and msg are reused by Recv (a frame is the caller's only until
	// the next Recv): no Request or Message allocated per batch.
	req sluicev1.Request
	msg protocol.Message
}

func (c *sendServer) Send(f protocol.Frame) error {
	resp, err := ResponseFromFrame(f)
	if err != nil {
		return err
	}
	return SessionError(c.stream.Send(resp))
}

func (c *sendServer) Recv() (protocol.Frame, error) {
	if err := c.stream.RecvMsg(&c.req); err != nil {
		return nil, SessionError(err)
	}
	if messageFromRequest(&c.msg, &c.req) {
		return &c.msg, nil
	}
	return FrameFromRequest(&c.req)
}

func (c *sendServer) Peer() protocol.PeerInfo { return peerInfo(c.stream.Context()) }

type readServer struct {
	serverEnd
	stream grpc.BidiStreamingServer[sluicev1.ReadRequest, sluicev1.ReadResponse]
}

func (c *readServer) Send(f protocol.Frame) error {
	resp, err := ReadResponseFromFrame(f)
	if err != nil {
		return err
	}
	return SessionError(c.stream.Send(resp))
}

func (c *readServer) Recv() (protocol.Frame, error) {
	req, err := c.stream.Recv()
	if err != nil {
		return nil, SessionError(err)
	}
	return FrameFromReadRequest(req)
}

func (c *readServer) Peer() protocol.PeerInfo { return peerInfo(c.stream.Context()) }

// peerInfo reads the peer's address, TLS state and bearer token from a
// stream's context.
func peerInfo(ctx context.Context) protocol.PeerInfo {
	var pi protocol.PeerInfo
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			pi.Addr = p.Addr.String()
		}
		if p.LocalAddr != nil {
			pi.Local = p.LocalAddr.String()
		}
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			st := ti.State
			pi.TLS = (*tls.ConnectionState)(&st)
		}
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for _, v := range md.Get("authorization") {
			if tok, ok := strings.CutPrefix(v, "Bearer "); ok {
				pi.Token = tok
			}
		}
	}
	return pi
}

// PayloadsOwned: gRPC unmarshals every Request into memory of its own
// (ServerCodec: one buffer per Request, which the payload aliases), so the
// sink may keep a payload as received.
func (c *sendServer) PayloadsOwned() bool { return true }
