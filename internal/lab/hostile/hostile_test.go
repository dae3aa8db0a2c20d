package hostile_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	xferv1 "github.com/sluicehq/sluice/api/xfer/v1"
	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/lab/hostile"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/status"
	"github.com/sluicehq/sluice/internal/testkit/sinktest"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/internal/xfer/serve"
)

// docs/reliability.md's "Hostile clients on every listener", small
// enough for CI: a few hostile connections per mode against each real
// listener that is not RSocket (the sink's gRPC, the agent's ingest,
// xfer's gRPC, tus and plain POST, a metrics and status listener), in
// process on loopback, with their deadlines set small. Each checks that
// a well-behaved client is answered during the attack, that the
// connections that stop sending are closed by the server, that the heap
// grows by a bounded amount, and that after the hostile clients go the
// heap and the goroutines come back to near where they started.

const (
	conns = 4
	// stall is every deadline the servers get (header, body idle,
	// handshake, hello, stall). Also the well-behaved client's: at 200 ms
	// its ReadStart once missed the sink's hello deadline under -race
	// during a never-reads flood, on two loaded cores.
	stall = time.Second
	// bound is how long a hostile connection is held at most: far above
	// stall, so that the server's closes show.
	bound = 20 * time.Second
	// floodFor is how long the floods and resets go on.
	floodFor = 3 * time.Second
	// budget is the goal for 100 clients; 4 must stay below it.
	budget = 256 << 20
)

var quiet = slog.New(slog.DiscardHandler)

type listener struct {
	target hostile.Target
	addr   string
	good   func(context.Context) error
}

func target(t *testing.T, name string) hostile.Target {
	t.Helper()
	tg, err := hostile.ParseTarget(name)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func grpcClient(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func startSink(t *testing.T) listener {
	s := sinktest.Start(t, sink.Config{Logger: quiet, HelloTimeout: stall,
		StallTimeout: stall, HandshakeTimeout: stall, KeepaliveTime: stall, KeepaliveTimeout: stall}, "127.0.0.1:0")
	c := sluicev1.NewSinkClient(grpcClient(t, s.Addr))
	return listener{target: target(t, "sink"), addr: s.Addr, good: func(ctx context.Context) error {
		st, err := c.Read(ctx)
		if err != nil {
			return err
		}
		defer st.CloseSend()
		if err := st.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Start{Start: &sluicev1.ReadStart{}}}); err != nil {
			return err
		}
		// io.EOF: the sink has already ended the stream (an empty store
		// answers End to the start); Recv tells how.
		if err := st.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_RequestN{RequestN: 10}}); err != nil && err != io.EOF {
			return err
		}
		r, err := st.Recv()
		if err != nil {
			return err
		}
		if r.GetEnd() == nil {
			return fmt.Errorf("read of an empty sink: %v", r)
		}
		return nil
	}}
}

func httpGood(next func() string, method, want string) func(context.Context) error {
	cl := &http.Client{Transport: &http.Transport{}}
	return func(ctx context.Context) error {
		url := next()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"still":"there"}` + "\n")
		}
		req, err := http.NewRequestWithContext(ctx, method, url, body)
		if err != nil {
			return err
		}
		req.Header.Set("Tus-Resumable", "1.0.0")
		resp, err := cl.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 || !strings.Contains(string(b), want) {
			return fmt.Errorf("%s %s: %s %q", method, url, resp.Status, b)
		}
		return nil
	}
}

func fixed(url string) func() string { return func() string { return url } }

func serveHTTP(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// As cmd/sluice's listeners, with the header deadline small.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: stall}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func startIngest(t *testing.T) listener {
	a, err := agent.New(agent.Config{SinkAddr: "127.0.0.1:1", SpoolDir: t.TempDir(), Logger: quiet,
		IngestBodyIdleTimeout: stall})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	addr := serveHTTP(t, a.Handler())
	return listener{target: target(t, "ingest"), addr: addr, good: httpGood(fixed("http://"+addr+"/v1/records"), http.MethodPost, "")}
}

func startMetrics(t *testing.T) listener {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	mux := http.NewServeMux()
	mux.Handle("/metrics", status.MetricsHandler(reg))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("/", status.Handler(ctx, status.Config{Kind: status.KindSink, Gatherer: reg, Log: quiet}))
	addr := serveHTTP(t, mux)
	return listener{target: target(t, "metrics"), addr: addr, good: httpGood(fixed("http://"+addr+"/metrics"), http.MethodGet, "go_goroutines")}
}

func startXfer(t *testing.T, name string) listener {
	store, err := diskstore.Open(t.TempDir(), diskstore.Options{IdleTimeout: stall, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	srv, err := serve.Start(store, serve.Listen{GRPC: "127.0.0.1:0", TUS: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	l := listener{target: target(t, name)}
	switch name {
	case "xfer-grpc":
		l.addr = srv.Addrs.GRPC
		c := xferv1.NewXferClient(grpcClient(t, l.addr))
		l.good = func(ctx context.Context) error {
			_, err := c.Offset(ctx, &xferv1.OffsetRequest{Name: "nothing-here"})
			return err
		}
	case "xfer-tus":
		l.addr = srv.Addrs.TUS
		l.good = httpGood(fixed("http://"+l.addr+"/files/"), http.MethodOptions, "")
	case "xfer-http":
		l.addr = srv.Addrs.HTTP
		n := 0
		l.good = httpGood(func() string { n++; return fmt.Sprintf("http://%s/post/good-%d", l.addr, n) }, http.MethodPost, "")
	}
	return l
}

// settle waits (at most 20 s) until the heap after a GC is within 10 %
// (or 8 MB) of base and the goroutines are within 10 of goroutines,
// and reports where they stopped.
func settle(base int64, goroutines int) (heap int64, g int, ok bool) {
	for range 200 {
		heap, g = hostile.HeapInuse(), runtime.NumGoroutine()
		if heap <= base+max(base/10, 8<<20) && g <= goroutines+10 {
			return heap, g, true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return heap, g, false
}

func TestHostileListeners(t *testing.T) {
	starts := map[string]func(*testing.T) listener{
		"sink": startSink, "ingest": startIngest, "metrics": startMetrics,
		"xfer-grpc": func(t *testing.T) listener { return startXfer(t, "xfer-grpc") },
		"xfer-tus":  func(t *testing.T) listener { return startXfer(t, "xfer-tus") },
		"xfer-http": func(t *testing.T) listener { return startXfer(t, "xfer-http") },
	}
	for _, tg := range hostile.Targets {
		for _, mode := range hostile.Modes {
			t.Run(tg.Name+"/"+string(mode), func(t *testing.T) {
				testHostile(t, starts[tg.Name], mode)
			})
		}
	}
}

func testHostile(t *testing.T, start func(*testing.T) listener, mode hostile.Mode) {
	l := start(t)
	// The well-behaved client's connection is open before the base.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := l.good(ctx); err != nil {
		cancel()
		t.Fatalf("before the attack: %v", err)
	}
	cancel()
	base, goroutines := hostile.HeapInuse(), runtime.NumGoroutine()
	stopGood := hostile.Good(l.good)
	peak := hostile.HeapPeak()
	// From another address than the well-behaved client's, as
	// scripts/hostile-listeners.sh does: the sink's bounds per address
	// (connections before a Hello, consumers) share it out by address,
	// and with the hostile clients on its own address the well-behaved
	// client is refused by design.
	cfg := hostile.Config{Addr: l.addr, Source: "127.0.0.2", Target: l.target, Mode: mode, Conns: conns, Duration: bound}
	stops := true
	switch mode {
	case hostile.Flood, hostile.NeverReads, hostile.Reset:
		cfg.Duration, cfg.MaxRequests, stops = floodFor, 2000, false
	}
	rep, err := hostile.Run(context.Background(), cfg)
	grew := peak()
	answered, gerr := stopGood()
	t.Logf("%+v; heap grew by at most %d MB; the good client was answered %d times", rep, grew>>20, answered)
	if err != nil || rep.Opened != conns {
		t.Fatalf("hostile run: %+v %v", rep, err)
	}
	if gerr != nil || answered == 0 {
		t.Errorf("the well-behaved client during the attack: %d answers, then %v", answered, gerr)
	}
	if stops && rep.Closed != conns {
		t.Errorf("the server closed %d of the %d hostile connections within %v", rep.Closed, conns, bound)
	}
	if grew > budget {
		t.Errorf("the server's heap grew by %d MB; want at most %d MB", grew>>20, budget>>20)
	}
	heap, g, ok := settle(base, goroutines)
	if !ok {
		t.Errorf("after the hostile clients went: heap %d MB (%d MB before), %d goroutines (%d before)",
			heap>>20, base>>20, g, goroutines)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.good(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("after the attack: %v", err)
	}
}

// The hand-made protobuf of NeverReads's gRPC streams is what the
// generated code makes.
func TestAskMessages(t *testing.T) {
	want := map[string][][]proto.Message{
		"sink": {{&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Start{Start: &sluicev1.ReadStart{Follow: true}}}},
			{&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_RequestN{RequestN: 1<<32 - 1}}}},
		"xfer-grpc": {{&xferv1.OffsetRequest{Name: "hostile"}}},
	}
	for name, msgs := range want {
		tg := target(t, name)
		if len(tg.GRPCAsk) != len(msgs) {
			t.Fatalf("%s: %d messages, want %d", name, len(tg.GRPCAsk), len(msgs))
		}
		for i, m := range msgs {
			b, err := proto.Marshal(m[0])
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, tg.GRPCAsk[i]) {
				t.Errorf("%s message %d: % x, want % x", name, i, tg.GRPCAsk[i], b)
			}
		}
	}
}
