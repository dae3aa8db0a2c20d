package sink

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
)

// TestManyFollowersOneConn: 200 Read followers over one gRPC connection,
// with the sink's default limits, all receive every record, the old ones
// and those stored while they follow (issue 23: with the old default of 16
// concurrent streams per connection, the client queued 184 of them, which
// got nothing and no error).
func TestManyFollowersOneConn(t *testing.T) {
	const followers = 200
	h := newHarness(t, nil)
	a := h.connect("many")
	const before, after = 8, 8
	for id := range uint64(before) {
		a.Send(sinkclient.PlainRequest(id, sinkclient.Records(id, 4)...))
	}
	a.Collect(0, before-1)

	cc, err := grpc.NewClient(h.cc.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	// A bound against a hang, not a measurement: before the fix the queued
	// followers never got anything.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type result struct {
		got map[uint64]int // message id -> records
		err error
	}
	caught := make(chan error, followers)
	done := make(chan result, followers)
	for range followers {
		go func() {
			got := map[uint64]int{}
			fctx, fcancel := context.WithCancel(ctx)
			defer fcancel()
			errc := make(chan error, 1)
			go sinkclient.Follow(fctx, cc, errc, func(r *sluicev1.ReadResponse) {
				if m := r.GetMessage(); m != nil {
					want := sinkclient.Records(m.GetMessageId(), 4)
					for i, r := range m.GetRecords() {
						if i < len(want) && string(r) == want[i] {
							got[m.GetMessageId()]++
						}
					}
					if m.GetMessageId() == before+after-1 {
						fcancel()
					}
				}
			})
			err := <-errc // nil at the first EndOfLog
			caught <- err
			if err != nil {
				done <- result{err: err}
				return
			}
			<-fctx.Done()
			done <- result{got: got, err: ctx.Err()}
		}()
	}
	for i := range followers {
		if err := <-caught; err != nil {
			t.Fatalf("%d of %d followers reached the end of the log; then: %v", i, followers, err)
		}
	}
	for id := uint64(before); id < before+after; id++ {
		a.Send(sinkclient.PlainRequest(id, sinkclient.Records(id, 4)...))
	}
	a.Collect(before, before+after-1)
	for i := range followers {
		r := <-done
		if r.err != nil {
			t.Fatalf("follower %d: %v", i, r.err)
		}
		for id := range uint64(before + after) {
			if r.got[id] != 4 {
				t.Fatalf("follower %d: message %d: %d records, want 4 (got %v)", i, id, r.got[id], r.got)
			}
		}
	}
	if n := counterValue(t, h.s.m.connStreamCap); n != 0 {
		t.Errorf("sluice_sink_conn_stream_cap_total = %v with %d streams on one connection, want 0", n, followers)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestReadBudgetPerFollower: with every consumer the sink serves by
// default (MaxConsumers, also the default streams of one connection) the
// read chunks stay within the shared read budget, at most 1 MiB per
// follower, so raising MaxStreamsPerConn to 256 does not raise what
// followers hold.
func TestReadBudgetPerFollower(t *testing.T) {
	if DefaultMaxStreamsPerConn < 100 {
		t.Errorf("DefaultMaxStreamsPerConn = %d; RFC 9113 §5.1.2 recommends no less than 100", DefaultMaxStreamsPerConn)
	}
	if DefaultMaxStreamsPerConn > DefaultMaxConsumers {
		t.Errorf("DefaultMaxStreamsPerConn %d > DefaultMaxConsumers %d: the extra streams of a connection of consumers are refused anyway", DefaultMaxStreamsPerConn, DefaultMaxConsumers)
	}
	s := &Sink{}
	for _, n := range []int{1, 16, 200, DefaultMaxStreamsPerConn, DefaultMaxConsumers} {
		s.consumers.Store(int64(n))
		c := s.readChunk()
		if c > 1<<20 {
			t.Errorf("%d followers: read chunk %d bytes each, over 1 MiB", n, c)
		}
		if n >= 64 && c*n > readBufferBudget {
			t.Errorf("%d followers: %d bytes of chunks in all, over the %d-byte read budget", n, c*n, readBufferBudget)
		}
	}
}
