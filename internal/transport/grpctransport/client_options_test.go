package grpctransport

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/defaults"
)

// gRPC's own connect back-off is bounded by the caller's reconnect max
// (issue 24: it grew from 1 s to 120 s under the agent's 5 s, and an
// agent took 11.3 s to reconnect after a 33 s outage).
func TestConnectParamsBounded(t *testing.T) {
	for _, c := range []struct{ max, want time.Duration }{{0, defaults.ReconnectMax}, {200 * time.Millisecond, 200 * time.Millisecond}, {30 * time.Second, 30 * time.Second}} {
		p := ClientOptions{ReconnectMax: c.max}.ConnectParams()
		if p.Backoff.MaxDelay != c.want || p.Backoff.BaseDelay > c.want || p.Backoff.BaseDelay <= 0 || p.MinConnectTimeout != MinConnectTimeout {
			t.Errorf("ReconnectMax %v: %+v, want MaxDelay %v, BaseDelay in (0, %v], MinConnectTimeout %v", c.max, p, c.want, c.want, MinConnectTimeout)
		}
	}
}

// The dial options carry the bound: a connection to a peer that refuses
// every handshake is retried by gRPC alone at most ReconnectMax apart, so
// 12 attempts with a 20 ms bound come well within the generous wait below
// (gRPC's default back-off, 1 s growing by 1.6, takes over 6 minutes).
func TestDialOptionsBoundConnectBackoff(t *testing.T) {
	var attempts atomic.Int32
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		attempts.Add(1)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errRefused{}}
	}
	opts, err := ClientOptions{ReconnectMax: 20 * time.Millisecond, Extra: []grpc.DialOption{grpc.WithContextDialer(dialer)}}.DialOptions()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("passthrough:///refused", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cc.Connect()
	deadline := time.Now().Add(60 * time.Second)
	for attempts.Load() < 12 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connect attempts in 60 s with ReconnectMax 20ms", attempts.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type errRefused struct{}

func (errRefused) Error() string { return "connection refused" }
