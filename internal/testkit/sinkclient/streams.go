package sinkclient

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/batch"
)

// Wait bounds every blocking step of a test's stream: generous, so that a
// loaded machine slows a test down instead of failing it. Nothing waits
// for it to pass unless the test is failing.
const Wait = 60 * time.Second

// The raw streams a test plays an agent or a consumer with. The sink's
// tests and its gRPC server's each had their own copy; they are one
// here so that both read the wire the same way.

// Agent is a raw Send stream: the test plays the agent.
type Agent struct {
	tb      testing.TB
	Stream  grpc.BidiStreamingClient[sluicev1.Request, sluicev1.Response]
	Cancel  context.CancelFunc // ends the stream from the agent's side
	Welcome *sluicev1.Welcome  // set by ConnectAgent
	Resps   chan *sluicev1.Response
	End     chan error // the stream's final status (io.EOF for OK)
}

// OpenAgent opens a Send stream on client, without a Hello.
func OpenAgent(tb testing.TB, client sluicev1.SinkClient) *Agent {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := client.Send(ctx)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	a := &Agent{tb: tb, Stream: stream, Cancel: cancel, Resps: make(chan *sluicev1.Response, 1024), End: make(chan error, 1)}
	tb.Cleanup(cancel)
	go Pump(stream.Recv, a.Resps, a.End)
	return a
}

// ConnectAgent opens a Send stream and completes the handshake as agent,
// offering the zstd dictionaries dicts.
func ConnectAgent(tb testing.TB, client sluicev1.SinkClient, agent string, dicts ...uint32) *Agent {
	tb.Helper()
	a := OpenAgent(tb, client)
	a.Send(Hello(agent, dicts...))
	r := a.Next()
	if a.Welcome = r.GetWelcome(); a.Welcome == nil {
		tb.Fatalf("first response %v is not a Welcome", r)
	}
	return a
}

// Send sends req; the sink having ended the stream is not a failure
// (Status says why it did).
func (a *Agent) Send(req *sluicev1.Request) {
	a.tb.Helper()
	if err := a.Stream.Send(req); err != nil && err != io.EOF {
		a.tb.Fatalf("Send: %v", err)
	}
}

// Next returns the next response, failing the test if none comes.
func (a *Agent) Next() *sluicev1.Response {
	a.tb.Helper()
	return Next(a.tb, a.Resps, a.End, Wait, "stream ended", "no response")
}

// None checks that no response arrives within quiet (a negative check
// can only watch for a while).
func (a *Agent) None(quiet time.Duration) {
	a.tb.Helper()
	none(a.tb, a.Resps, quiet)
}

// Status waits for the stream to end and returns its status error (nil
// for OK).
func (a *Agent) Status() error {
	a.tb.Helper()
	return status(a.tb, a.Resps, a.End, "stream did not end")
}

// Collect reads responses until every id in ids is acked and returns the
// ServiceMessages seen meanwhile.
func (a *Agent) Collect(ids ...uint64) []*sluicev1.ServiceMessage {
	a.tb.Helper()
	want := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var infos []*sluicev1.ServiceMessage
	for len(want) > 0 {
		r := a.Next()
		if info := r.GetInfo(); info != nil {
			infos = append(infos, info)
			continue
		}
		for _, rg := range r.GetAck().GetRanges() {
			for id := rg.First; id <= rg.Last; id++ {
				delete(want, id)
			}
		}
	}
	return infos
}

// ErrorFor reads responses until the ServiceMessage error about id and
// returns it with that ServiceMessage's credits (nil if none).
func (a *Agent) ErrorFor(id uint64) (*sluicev1.MessageError, *sluicev1.Credits) {
	a.tb.Helper()
	for {
		r := a.Next()
		if e := r.GetInfo().GetError(); e != nil && e.MessageId == id {
			return e, r.GetInfo().GetCredits()
		}
	}
}

// Body is the plain batch of records recs.
func Body(recs ...string) []byte {
	var b batch.Builder
	for _, r := range recs {
		if err := b.Add([]byte(r)); err != nil {
			panic(err)
		}
	}
	return bytes.Clone(b.Bytes())
}

// PlainRequest is message id of records recs, uncompressed.
func PlainRequest(id uint64, recs ...string) *sluicev1.Request {
	return &sluicev1.Request{Version: 1, MessageId: id, RecordCount: uint32(len(recs)),
		Payload: &sluicev1.Request_Plain{Plain: Body(recs...)}}
}

// Reader is a raw Read stream: the test plays the consumer.
type Reader struct {
	tb     testing.TB
	Stream grpc.BidiStreamingClient[sluicev1.ReadRequest, sluicev1.ReadResponse]
	Resps  chan *sluicev1.ReadResponse
	End    chan error
}

// OpenReader opens a Read stream on client and sends start, unless nil.
func OpenReader(tb testing.TB, client sluicev1.SinkClient, start *sluicev1.ReadStart) *Reader {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	stream, err := client.Read(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	r := &Reader{tb: tb, Stream: stream, Resps: make(chan *sluicev1.ReadResponse, 1024), End: make(chan error, 1)}
	go Pump(stream.Recv, r.Resps, r.End)
	if start != nil {
		r.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Start{Start: start}})
	}
	return r
}

// Send sends req; the sink having ended the stream is not a failure
// (Status says why it did).
func (r *Reader) Send(req *sluicev1.ReadRequest) {
	r.tb.Helper()
	if err := r.Stream.Send(req); err != nil && err != io.EOF {
		r.tb.Fatal(err)
	}
}

// Request grants n more messages.
func (r *Reader) Request(n uint32) {
	r.tb.Helper()
	r.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_RequestN{RequestN: n}})
}

// Commit commits the consumer's offset off.
func (r *Reader) Commit(off uint64) {
	r.tb.Helper()
	r.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Commit{Commit: off}})
}

// Next returns the next response, failing the test if none comes.
func (r *Reader) Next() *sluicev1.ReadResponse {
	r.tb.Helper()
	return Next(r.tb, r.Resps, r.End, Wait, "read stream ended", "nothing read")
}

// None checks that nothing arrives within quiet.
func (r *Reader) None(quiet time.Duration) {
	r.tb.Helper()
	none(r.tb, r.Resps, quiet)
}

// Status waits for the stream to end and returns its status error (nil
// for OK).
func (r *Reader) Status() error {
	r.tb.Helper()
	return status(r.tb, r.Resps, r.End, "read stream did not end")
}

func none[T any](tb testing.TB, msgs <-chan *T, quiet time.Duration) {
	tb.Helper()
	select {
	case m, ok := <-msgs:
		if ok {
			tb.Fatalf("unexpected %v", m)
		}
	case <-time.After(quiet):
	}
}

func status[T any](tb testing.TB, msgs <-chan *T, end <-chan error, stuck string) error {
	tb.Helper()
	for {
		select {
		case _, ok := <-msgs:
			if !ok {
				err := <-end
				if err == io.EOF {
					return nil
				}
				return err
			}
		case <-time.After(Wait):
			tb.Fatal(stuck)
		}
	}
}
