package otlpgrpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/agent/collect"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/testkit/h2raw"
	"github.com/sluicehq/sluice/internal/testkit/spooltest"
	"github.com/sluicehq/sluice/internal/testkit/syncbuf"
	"github.com/sluicehq/sluice/internal/testkit/testpki"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// stallServer is the OTLP/gRPC server with its stall watch driven by the
// test: look makes the watch look once at the fake clock's time.
type stallServer struct {
	srv     *Server
	addr    string
	spool   *spooltest.Recorder
	reg     *prometheus.Registry
	logs    *syncbuf.Buffer
	now     atomic.Int64 // nanoseconds past base
	tick    chan time.Time
	checked chan struct{}
	// client is the TLS a raw client dials with (nil: plaintext).
	client *tls.Config
}

// startStallServer serves OTLP/gRPC with the default stall timeout, over
// TLS if withTLS.
func startStallServer(t *testing.T, withTLS bool) *stallServer {
	t.Helper()
	s := &stallServer{spool: &spooltest.Recorder{}, reg: prometheus.NewRegistry(), logs: &syncbuf.Buffer{},
		tick: make(chan time.Time), checked: make(chan struct{})}
	base := time.Unix(1e9, 0)
	opts := Options{Registry: s.reg, Logger: testLogger(s.logs),
		stallTick: s.tick, stallNow: func() time.Time { return base.Add(time.Duration(s.now.Load())) },
		stallChecked: func() { s.checked <- struct{}{} }}
	if withTLS {
		ca := testpki.NewCA(t)
		opts.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "agent", x509.ExtKeyUsageServerAuth)}, MinVersion: tls.VersionTLS12}
		s.client = &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	s.srv = NewServer(collect.New(collect.Config{Ingest: s.spool.Ingest, MaxRecordBytes: defaultMaxRecord}), opts)
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(lis) }()
	t.Cleanup(func() {
		s.srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

// look makes the watch look once, after the clock moved by d.
func (s *stallServer) look(t *testing.T, d time.Duration) {
	t.Helper()
	s.now.Add(int64(d))
	select {
	case s.tick <- time.Time{}:
	case <-time.After(testwait.Bound):
		t.Fatal("the stall watch does not tick")
	}
	select {
	case <-s.checked:
	case <-time.After(testwait.Bound):
		t.Fatal("the stall watch did not finish its look")
	}
}

// stalledConns is sluice_agent_otlp_grpc_stalled_conns_total.
func (s *stallServer) stalledConns(t *testing.T) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "sluice_agent_otlp_grpc_stalled_conns_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no sluice_agent_otlp_grpc_stalled_conns_total")
	return 0
}

// waitHeld waits until the server holds n bytes of partial messages.
func (s *stallServer) waitHeld(t *testing.T, n int64) {
	t.Helper()
	testwait.For(t, "the receiver to hold the bytes sent", func() bool { return s.srv.stalls.HeldBytes() == n })
}

// dialRaw connects an h2raw client to s (over TLS when s has a client
// config): it can send an Export message as slowly as it likes and stop
// in the middle, which a gRPC client never does.
func dialRaw(t *testing.T, s *stallServer) *h2raw.Client {
	t.Helper()
	var c net.Conn
	var err error
	if s.client != nil {
		c, err = tls.Dial("tcp", s.addr, s.client)
	} else {
		c, err = net.Dial("tcp", s.addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return h2raw.Start(t, c, 0)
}

// exportPath is the method the raw client's streams call.
const exportPath = collogspb.LogsService_Export_FullMethodName

// bigPrefix is the start of a 2 MiB message: its length prefix and the
// first 200 KiB.
func bigPrefix() []byte {
	b := make([]byte, 5+200<<10)
	binary.BigEndian.PutUint32(b[1:], 2<<20)
	return b
}

// TestGRPCStalledMessage: a client that answers pings but begins an
// Export message and stops (200 KiB of 2 MiB sent), or trickles it (1 KiB
// per quarter of the stall timeout), has its connection closed once a
// stall timeout (the sink's default, a minute) has passed with less than
// 64 KiB more, and not before; nothing is spooled; in plaintext and over
// TLS. Before, the stream and its 200 KiB were held for as long as the
// client kept answering pings.
func TestGRPCStalledMessage(t *testing.T) {
	for _, mode := range []string{"plaintext", "tls"} {
		t.Run(mode+"/stopped", func(t *testing.T) {
			s := startStallServer(t, mode == "tls")
			r := dialRaw(t, s)
			r.Open(1, exportPath, "agent")
			big := bigPrefix()
			r.Data(t, 1, big)
			s.waitHeld(t, int64(len(big)))
			s.look(t, 0) // the watch sees the bytes
			s.look(t, defaults.StallTimeout-time.Second)
			if got := s.stalledConns(t); got != 0 {
				t.Fatalf("stalled_conns_total = %v before the stall timeout, want 0", got)
			}
			s.look(t, time.Second)
			if got := s.stalledConns(t); got != 1 {
				t.Fatalf("stalled_conns_total = %v, want 1", got)
			}
			r.WaitClosed(t, "the stalled connection")
			if logs := s.logs.String(); !strings.Contains(logs, "stopped sending") || !strings.Contains(logs, "held_bytes=") {
				t.Errorf("no warning naming the bytes held:\n%s", logs)
			}
			testwait.For(t, "the watch to let go of the stalled message", func() bool { return s.srv.stalls.HeldBytes() == 0 })
			if n := len(s.spool.Taken()); n != 0 {
				t.Fatalf("%d records spooled from a stalled message", n)
			}
		})
		t.Run(mode+"/trickle", func(t *testing.T) {
			s := startStallServer(t, mode == "tls")
			r := dialRaw(t, s)
			r.Open(1, exportPath, "agent")
			big := bigPrefix()
			r.Data(t, 1, big)
			held := int64(len(big))
			s.waitHeld(t, held)
			s.look(t, 0)
			for i := 1; i <= 4; i++ {
				r.Data(t, 1, make([]byte, 1<<10))
				held += 1 << 10
				s.waitHeld(t, held)
				s.look(t, defaults.StallTimeout/4)
				want := 0.0
				if i == 4 {
					want = 1
				}
				if got := s.stalledConns(t); got != want {
					t.Fatalf("after %d quarter timeouts of trickle: stalled_conns_total = %v, want %v", i, got, want)
				}
			}
			r.WaitClosed(t, "the trickling connection")
		})
	}
}

// TestGRPCStallSparesProgressAndIdle: an Export of about 1 MiB sent at a
// 16 KiB frame per eighth of the stall timeout (twice the 64 KiB a
// timeout asks for; about 2 KB/s at the default) is received whole and
// spooled; a gRPC client that exported and then stays idle for hours of
// the watch's looks is not cut and exports again on its connection.
func TestGRPCStallSparesProgressAndIdle(t *testing.T) {
	s := startStallServer(t, false)
	cc, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	idle := collogspb.NewLogsServiceClient(cc)
	if _, err := idle.Export(context.Background(), logsRequest("idle", "first")); err != nil {
		t.Fatal(err)
	}

	r := dialRaw(t, s)
	r.Open(1, exportPath, "agent")
	// 16 resources of 64 KiB: the receiver splits it into records within
	// the default --max-record (256 KiB).
	var b []byte
	for i := range 16 {
		var bodies []string
		for j := range 4 {
			bodies = append(bodies, strings.Repeat(string(rune('a'+(i+j)%26)), 16<<10))
		}
		part, err := proto.Marshal(logsRequest(fmt.Sprintf("slow-%d", i), bodies...))
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, part...) // concatenated messages merge: their resources add up
	}
	msg := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...)
	for off := 0; off < len(msg); off += 16 << 10 {
		end := min(off+16<<10, len(msg))
		r.Data(t, 1, msg[off:end])
		if end < len(msg) {
			s.waitHeld(t, int64(end))
		}
		s.look(t, defaults.StallTimeout/8)
	}
	r.End(1)
	testwait.For(t, "the slow Export to be spooled", func() bool { return spooledResources(t, s.spool) == 1+16 })

	for range 20 {
		s.look(t, 10*defaults.StallTimeout)
	}
	if got := s.stalledConns(t); got != 0 {
		t.Errorf("stalled_conns_total = %v, want 0: a progressing or idle connection was cut", got)
	}
	select {
	case <-r.Closed:
		t.Error("the slow but progressing connection was closed")
	default:
	}
	if _, err := idle.Export(context.Background(), logsRequest("idle", "after hours")); err != nil {
		t.Fatalf("the idle client's next Export: %v", err)
	}
}

func testLogger(w *syncbuf.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// spooledResources counts the resources of the logs records spooled.
func spooledResources(t *testing.T, fs *spooltest.Recorder) int {
	t.Helper()
	n := 0
	for _, rec := range fs.Taken() {
		_, b, err := telemetry.Decode(rec)
		var req collogspb.ExportLogsServiceRequest
		if err != nil || proto.Unmarshal(b, &req) != nil {
			t.Fatalf("spooled a record that is not a logs request: %v", err)
		}
		n += len(req.ResourceLogs)
	}
	return n
}
