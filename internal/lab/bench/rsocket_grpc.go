package bench

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/lab/bench/rr"
)

// gRPC bidi ping-pong, the baseline of `sluice bench rsocket`: inflight
// bidirectional streams on one connection, each sending a message and
// waiting for its echo. Messages are raw bytes (a pass-through codec), so
// gRPC does no protobuf work that sluice does not do either.

type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, errors.New("bench: raw codec takes *[]byte")
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return errors.New("bench: raw codec takes *[]byte")
	}
	*b = append((*b)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "raw" }

var pingPongDesc = grpc.ServiceDesc{
	ServiceName: "sluice.bench.PingPong",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName: "Echo", ServerStreams: true, ClientStreams: true,
		Handler: func(_ any, s grpc.ServerStream) error {
			var b []byte
			for {
				if err := s.RecvMsg(&b); err != nil {
					return nil // the client closed or went away
				}
				if err := s.SendMsg(&b); err != nil {
					return err
				}
			}
		},
	}},
}

// GRPCBidi runs inflight ping-pong streams over one gRPC connection to a
// server in this process.
func GRPCBidi(ctx context.Context, inflight int, dur time.Duration, size int) (RRResult, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return RRResult{}, err
	}
	// Tuned as grpc-go's own benchmarks tune it for throughput (see
	// rr.GRPCServerOptions); raw bytes as its worker's byteBufCodec.
	srv := grpc.NewServer(append(rr.GRPCServerOptions(), grpc.ForceServerCodec(rawCodec{}))...)
	srv.RegisterService(&pingPongDesc, nil)
	go srv.Serve(ln)
	defer srv.Stop()
	cc, err := grpc.NewClient(ln.Addr().String(), append(rr.GRPCDialOptions(), grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))...)
	if err != nil {
		return RRResult{}, err
	}
	defer cc.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One stream per in-flight slot, handed to whichever worker is free.
	streams := make(chan grpc.ClientStream, inflight)
	for range inflight {
		s, err := cc.NewStream(sctx, &pingPongDesc.Streams[0], "/sluice.bench.PingPong/Echo")
		if err != nil {
			return RRResult{}, err
		}
		streams <- s
	}
	msg := make([]byte, size)
	return withCPU(func() (RRResult, error) { return grpcLoop(ctx, inflight, dur, streams, msg) })
}

func grpcLoop(ctx context.Context, inflight int, dur time.Duration, streams chan grpc.ClientStream, msg []byte) (RRResult, error) {
	var bufs sync.Pool
	return ClosedLoop(ctx, inflight, dur, 1<<40, func(context.Context) error {
		s := <-streams
		defer func() { streams <- s }()
		out := msg
		if err := s.SendMsg(&out); err != nil {
			return err
		}
		bp, _ := bufs.Get().(*[]byte)
		if bp == nil {
			bp = new([]byte)
		}
		defer bufs.Put(bp)
		return s.RecvMsg(bp)
	})
}
