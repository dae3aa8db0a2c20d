package sink

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
)

// TestConsumersPerPeer: Read streams from one address that never read
// take at most Config.MaxConsumersPerPeer slots, whatever their
// connections; the rest are refused (ResourceExhausted, counted in
// refused_total{reason="consumers_per_peer"}, one Warn), and a consumer
// from another address is served meanwhile. Before, one client's Read
// streams took every one of the sink's 256 slots and the other consumer
// was refused (issue 23 item 6, the sink's never-reads row). Defaults.
func TestConsumersPerPeer(t *testing.T) {
	h := newHarness(t, nil)
	const conns, perConn = 2, 150 // 300 streams, under the 256 of one connection
	extra := conns*perConn - DefaultMaxConsumersPerPeer
	if extra <= 0 {
		t.Fatalf("%d streams do not exceed the %d per address", conns*perConn, DefaultMaxConsumersPerPeer)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fromOther := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
		return d.DialContext(ctx, "tcp", addr)
	})
	var refused, other atomic.Int64
	var ccs []*grpc.ClientConn
	for range conns {
		cc, err := grpc.NewClient(h.cc.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()), fromOther)
		if err != nil {
			t.Fatal(err)
		}
		ccs = append(ccs, cc)
		client := sluicev1.NewSinkClient(cc)
		for range perConn {
			st, err := client.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Following from the start with no credit: the stream holds
			// its slot and reads nothing.
			_ = st.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Start{Start: &sluicev1.ReadStart{Follow: true}}})
			go func() {
				for {
					if _, err := st.Recv(); err != nil {
						if status.Code(err) == codes.ResourceExhausted {
							refused.Add(1)
						} else if ctx.Err() == nil {
							other.Add(1)
						}
						return
					}
				}
			}()
		}
	}
	deadline := time.Now().Add(wait)
	for refused.Load() < int64(extra) || metricValue(t, h, "sluice_sink_consumers") < float64(DefaultMaxConsumersPerPeer) {
		if time.Now().After(deadline) || other.Load() > 0 {
			t.Fatalf("hostile streams: %d refused (want %d), %d ended otherwise, %v served", refused.Load(), extra,
				other.Load(), metricValue(t, h, "sluice_sink_consumers"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A consumer from 127.0.0.1 while they hold their share.
	r := h.read(&sluicev1.ReadStart{})
	r.Request(10)
	if m, ok := <-r.Resps; !ok {
		t.Fatalf("a consumer from another address while one address holds every slot it may: %v", <-r.End)
	} else if m.GetEnd() == nil {
		t.Fatalf("read of an empty sink: %v", m)
	}
	if got := refused.Load(); got != int64(extra) {
		t.Errorf("%d hostile streams refused, want %d", got, extra)
	}
	if got := metricValue(t, h, "sluice_sink_refused_total{reason=consumers_per_peer}"); got != float64(extra) {
		t.Errorf("refused_total{consumers_per_peer} = %v, want %d", got, extra)
	}
	if n := strings.Count(h.logs.String(), "too many consumers from one address"); n != 1 {
		t.Errorf("%d warnings about the address, want 1 (once a minute):\n%s", n, h.logs.String())
	}
	// They go: every slot comes back.
	for _, cc := range ccs {
		cc.Close()
	}
	deadline = time.Now().Add(wait)
	for metricValue(t, h, "sluice_sink_consumers") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("consumers gauge %v after every consumer went", metricValue(t, h, "sluice_sink_consumers"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.s.slots.mu.Lock()
	open, peers := h.s.slots.open, len(h.s.slots.byPeer)
	h.s.slots.mu.Unlock()
	if open != 0 || peers != 0 {
		t.Errorf("after every consumer went: %d slots taken, %d addresses counted", open, peers)
	}
}
