package rsockethostile_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/lab/hostile"
	"github.com/sluicehq/sluice/internal/lab/rsockethostile"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/echo"
)

// The raw-frame reproductions of docs/rsocket.md's hostile-client table,
// small enough for CI: a few hostile connections per mode against a real
// rsocket.Serve (TCP) or ServeWebSocket on loopback, with the echo
// responder of `sluice rsocket serve` and small deadlines. Each checks
// that a well-behaved client is answered during the attack and after it,
// and that the hostile connections are closed (the modes that stop
// sending) or cost the server a bounded amount of memory (the floods).

const (
	conns = 4
	// stall is the setup and frame stall timeouts the servers get.
	stall = 200 * time.Millisecond
	// bound is how long a hostile connection is held at most: far above
	// stall, so that the modes that stop sending are closed well before
	// (over WebSocket the server's close waits up to 5 s for the
	// client's answer to its close handshake, which these never give).
	bound = 20 * time.Second
	// floodFor is how long the floods go on.
	floodFor = 3 * time.Second
	// serverBudget is the server-wide bound on what its connections'
	// buffers and the frames they are reading hold together
	// (docs/rsocket.md, "Hostile clients"); a flood may add it, one frame
	// (the one reader that may overdraw), a floor of 64 KiB per
	// connection and some slack to the heap, no more.
	serverBudget = rsocket.DefaultServerOutboundBudget
	floor        = 64 << 10
	slack        = 32 << 20
)

func serve(t *testing.T, scheme string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := []rsocket.Option{rsocket.WithSetupTimeout(stall), rsocket.WithFrameStallTimeout(stall)}
	if scheme == "ws" {
		go rsocket.ServeWebSocket(ctx, ln, "/rsocket", &echo.Responder{}, opts...)
		return "ws://" + ln.Addr().String() + "/rsocket"
	}
	go rsocket.Serve(ctx, ln, &echo.Responder{}, opts...)
	return "tcp://" + ln.Addr().String()
}

// goodClient sends request-responses to u, one at a time, until stop is
// called (hostile.Good); stop returns how many were answered and the
// first failure.
func goodClient(t *testing.T, u string) (stop func() (int, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	c, err := rsocket.Dial(ctx, u)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stopGood := hostile.Good(func(rctx context.Context) error {
		p, err := c.RequestResponse(rctx, rsocket.Payload{Data: []byte("still there?")})
		if err == nil && string(p.Data) != "still there?" {
			err = context.Canceled
		}
		return err
	})
	return func() (int, error) {
		n, err := stopGood()
		_ = c.Close()
		cancel()
		return n, err
	}
}

func TestHostileClients(t *testing.T) {
	for _, scheme := range []string{"tcp", "ws"} {
		for _, mode := range rsockethostile.Modes {
			t.Run(scheme+"/"+string(mode), func(t *testing.T) {
				flood := false
				switch mode {
				case rsockethostile.NeverReads, rsockethostile.KeepaliveFlood, rsockethostile.RequestFlood, rsockethostile.FNFFlood:
					// Bounded by the outbound budgets and the oneway
					// pool (docs/rsocket.md "Outbound bounds"); without
					// them the server's memory grows with the flood.
					flood = true
				}
				u := serve(t, scheme)
				stopGood := goodClient(t, u)
				peak := hostile.HeapPeak()
				cfg := rsockethostile.Config{URL: u, Mode: mode, Conns: conns, FrameSize: 1 << 20, Duration: bound}
				if flood {
					cfg.Duration, cfg.MaxFrames = floodFor, 128
				}
				rep, err := rsockethostile.Run(context.Background(), cfg)
				grew := peak()
				answered, gerr := stopGood()
				t.Logf("%+v; heap grew by at most %d MB; the good client was answered %d times", rep, grew>>20, answered)
				if err != nil || rep.Opened != conns {
					t.Fatalf("hostile run: %+v %v", rep, err)
				}
				if gerr != nil || answered == 0 {
					t.Fatalf("the well-behaved client during the attack: %d answers, then %v", answered, gerr)
				}
				if !flood && rep.Closed != conns {
					t.Errorf("the server closed %d of the %d hostile connections within %v", rep.Closed, conns, bound)
				}
				if lim := int64(serverBudget + cfg.FrameSize + conns*floor + slack); grew > lim {
					t.Errorf("the server's heap grew by %d MB; want at most %d MB (its budget, one frame, a floor per connection and slack)", grew>>20, lim>>20)
				}
				// The server still serves after the attack.
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				c, err := rsocket.Dial(ctx, u)
				if err != nil {
					t.Fatalf("after the attack: %v", err)
				}
				defer c.Close()
				if _, err := c.RequestResponse(ctx, rsocket.Payload{Data: []byte("after")}); err != nil {
					t.Fatalf("after the attack: %v", err)
				}
			})
		}
	}
}
