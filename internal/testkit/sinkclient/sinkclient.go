// Package sinkclient is what the tests that play a sink's client over
// gRPC share: the Hello an agent opens its Send stream with, distinct
// records for a message, a follower that reads the whole store and keeps
// following, the receive pump and bounded wait of a test's stream, the
// raw Send and Read streams a test plays an agent or a consumer with
// (streams.go), and the dial and shutdown of a harness's connection and
// sink. It is for tests only.
//
// It imports neither internal/sink nor its gRPC server
// (internal/transport/grpctransport/grpcserve), so that the in-package
// tests of both can use it.
package sinkclient

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
)

// Hello is the first request of an agent's Send stream: protocol version
// 1, every codec, and the zstd dictionaries dicts.
func Hello(agent string, dicts ...uint32) *sluicev1.Request {
	return &sluicev1.Request{Version: 1, Payload: &sluicev1.Request_Hello{Hello: &sluicev1.Hello{
		AgentId: agent, ProtocolVersion: 1, DictionaryIds: dicts,
		Codecs: []sluicev1.Codec{sluicev1.Codec_CODEC_PLAIN, sluicev1.Codec_CODEC_ZSTD, sluicev1.Codec_CODEC_ZSTD_DICT},
	}}}
}

// Records returns n distinct records for message id, of varying length.
func Records(id uint64, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "message " + strconv.FormatUint(id, 10) + " record " + strconv.Itoa(i) + " " + strings.Repeat("x", i%7)
	}
	return out
}

// Follow reads the whole store from cc and follows it until ctx ends or
// the stream fails. caught gets nil at the first EndOfLog, or the error if
// the stream fails before it; onMessage, if not nil, sees every response.
func Follow(ctx context.Context, cc grpc.ClientConnInterface, caught chan<- error, onMessage func(*sluicev1.ReadResponse)) {
	rs, err := sluicev1.NewSinkClient(cc).Read(ctx)
	if err == nil {
		err = rs.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Start{Start: &sluicev1.ReadStart{Follow: true}}})
	}
	if err == nil {
		err = rs.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_RequestN{RequestN: 1 << 30}})
	}
	told := false
	for err == nil {
		var r *sluicev1.ReadResponse
		if r, err = rs.Recv(); err != nil {
			break
		}
		if r.GetEnd() != nil && !told {
			told = true
			caught <- nil
		}
		if onMessage != nil {
			onMessage(r)
		}
	}
	if !told {
		caught <- err
	}
}

// Pump receives a stream's messages into msgs until Recv fails, then
// sends that error (io.EOF for a stream the server ended with OK) to end
// and closes msgs. Run it on its own goroutine.
func Pump[T any](recv func() (*T, error), msgs chan<- *T, end chan<- error) {
	for {
		m, err := recv()
		if err != nil {
			end <- err
			close(msgs)
			return
		}
		msgs <- m
	}
}

// Next returns the next message Pump delivered to msgs, failing the test
// with ended (and the stream's error) if the stream ended, or with none
// if nothing came within wait.
func Next[T any](tb testing.TB, msgs <-chan *T, end <-chan error, wait time.Duration, ended, none string) *T {
	tb.Helper()
	select {
	case m, ok := <-msgs:
		if !ok {
			tb.Fatalf("%s: %v", ended, <-end)
		}
		return m
	case <-time.After(wait):
		tb.Fatal(none)
	}
	return nil
}

// Dial connects to a sink's gRPC server at addr in plaintext, with opts
// after that (a test's extra dial options).
func Dial(tb testing.TB, addr string, opts ...grpc.DialOption) (*grpc.ClientConn, sluicev1.SinkClient) {
	tb.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return cc, sluicev1.NewSinkClient(cc)
}

// Served is a sink served on 127.0.0.1:0 with a test's client
// connection to it: what the harnesses of internal/sink's tests and of
// grpcserve's share.
type Served struct {
	CC     *grpc.ClientConn
	Client sluicev1.SinkClient
	sink   io.Closer
	served chan error
}

// Serve binds 127.0.0.1:0, runs serve on it (the sink's server; its
// result is awaited by Stop) and dials it in plaintext with opts.
func Serve(tb testing.TB, sink io.Closer, serve func(net.Listener) error, opts ...grpc.DialOption) *Served {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Served{sink: sink, served: make(chan error, 1)}
	go func() { s.served <- serve(lis) }()
	s.CC, s.Client = Dial(tb, lis.Addr().String(), opts...)
	return s
}

// Stop closes the test's connection, then the sink, and waits for serve
// to return; a failing Close or serve fails the test.
func (s *Served) Stop(tb testing.TB) {
	s.CC.Close()
	if err := s.sink.Close(); err != nil {
		tb.Errorf("Close: %v", err)
	}
	if err := <-s.served; err != nil {
		tb.Errorf("Serve: %v", err)
	}
}

// Logger is a sink's logger in a test: text lines of info and above into
// logs, which the test reads.
func Logger(logs io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
}
