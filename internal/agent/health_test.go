package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/sinktest"
	"github.com/sluicehq/sluice/internal/testkit/syncbuf"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
	"github.com/sluicehq/sluice/seglog"
)

// fakeSink serves a scripted protocol.Service (see driver_test.go) over
// real gRPC on loopback: how a frozen or hostile sink looks to the agent
// through the production transport, without stopping a process.
type fakeSink struct {
	addr string
	srv  *grpc.Server
}

func startFakeSink(t *testing.T, svc protocol.Service) *fakeSink {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSink{addr: lis.Addr().String(), srv: grpc.NewServer()}
	grpctransport.Register(f.srv, svc)
	go f.srv.Serve(lis)
	t.Cleanup(f.srv.Stop)
	return f
}

// silent never answers the Hello: a sink stuck before its handshake.
func silent() protocol.Service {
	svc := newFakeService()
	svc.hello = func(int, *protocol.Hello) (protocol.Frame, error) { return nil, nil }
	return svc
}

// neverAcks welcomes the agent with credits, reads what it sends and never
// acknowledges anything: a sink whose store froze.
func neverAcks() protocol.Service {
	svc := newFakeService()
	svc.message = func(int, *protocol.Message, int) (protocol.Frame, error) { return skipReply, nil }
	return svc
}

// gather returns the registry's metric families by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// value is the value of the series of name whose labels include want (nil:
// the only series); ok is false when there is no such series.
func value(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) (v float64, ok bool) {
	t.Helper()
	mf := gather(t, reg)[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		for k, wv := range want {
			found := false
			for _, lp := range m.GetLabel() {
				found = found || lp.GetName() == k && lp.GetValue() == wv
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestFrozenSinkFailover: a sink that never answers the handshake, and a
// sink that stops acknowledging, each make the agent move to the next sink
// in the list instead of waiting forever. Before the deadlines existed both
// cases hung (a gRPC stream has no timeout of its own and the frozen sink
// answers keepalive pings).
func TestFrozenSinkFailover(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frozen func() protocol.Service
		code   string
	}{
		{"no Welcome", silent, "HandshakeTimeout"},
		{"no ack", neverAcks, "ProgressTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			frozen := startFakeSink(t, tc.frozen())
			ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(dir, "sink")}, "127.0.0.1:0")
			defer ts.Stop()
			reg := prometheus.NewRegistry()
			a := newTestAgent(t, filepath.Join(dir, "spool"), func(c *Config) {
				c.SinkAddr = frozen.addr + "," + ts.Addr
				c.ReconnectMin, c.ReconnectMax = 10*time.Millisecond, 50*time.Millisecond
				c.HandshakeTimeout, c.ProgressTimeout = 200*time.Millisecond, 200*time.Millisecond
				c.Registry = reg
			})
			defer a.Close()
			if err := a.Ingest(context.Background(), [][]byte{[]byte("past the frozen sink")}); err != nil {
				t.Fatal(err)
			}
			waitAcked(t, a)
			if got := storedRecords(t, ts); got["past the frozen sink"] != 1 {
				t.Fatalf("store: %v", got)
			}
			// The first attempt went to the frozen sink; what ended it is
			// counted under its own code.
			if v, _ := value(t, reg, "sluice_agent_connect_failures_total", nil); tc.code == "HandshakeTimeout" && v < 1 {
				t.Fatalf("connect_failures_total = %v, want >= 1", v)
			}
			if v, _ := value(t, reg, "sluice_agent_reconnects_total", nil); tc.code == "ProgressTimeout" && v < 1 {
				t.Fatalf("reconnects_total = %v, want >= 1 (the stalled stream was dropped)", v)
			}
		})
	}
}

// TestPermanentErrorIsReported: a sink that refuses the agent's identity,
// a sink speaking another protocol version and an address that does not
// resolve each make the agent log one ERROR naming the cause (not one per
// retry), report the code in sluice_agent_last_error, sink_up 0, and not be
// ready. Failed attempts are not reconnects.
func TestPermanentErrorIsReported(t *testing.T) {
	for _, tc := range []struct {
		code string
		sink func(t *testing.T) string // returns the sink address
		want string                    // in the ERROR line
	}{
		{"PermissionDenied", func(t *testing.T) string {
			svc := newFakeService()
			svc.hello = func(int, *protocol.Hello) (protocol.Frame, error) {
				return nil, protocol.Errorf(protocol.StatusPermissionDenied, "this token may not send as agent x")
			}
			return startFakeSink(t, svc).addr
		}, "token"},
		{"VersionMismatch", func(t *testing.T) string {
			svc := newFakeService()
			svc.hello = func(int, *protocol.Hello) (protocol.Frame, error) {
				return &protocol.Welcome{Version: ProtocolVersion + 1}, nil
			}
			return startFakeSink(t, svc).addr
		}, "protocol"},
		{"BadAddress", func(t *testing.T) string { return "sluice-test-no-such-host.invalid:7000" }, "--sink"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			logs := &syncbuf.Buffer{}
			reg := prometheus.NewRegistry()
			a := newTestAgent(t, t.TempDir(), func(c *Config) {
				c.SinkAddr = tc.sink(t)
				c.ReconnectMin, c.ReconnectMax = time.Millisecond, 5*time.Millisecond
				c.Registry = reg
				c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			})
			defer a.Close()
			testwait.For(t, "several refused attempts", func() bool {
				v, _ := value(t, reg, "sluice_agent_connect_failures_total", nil)
				return v >= 5
			})
			if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
				t.Fatalf("%d ERROR lines for one unchanged cause, want 1:\n%s", n, logs)
			}
			if !strings.Contains(logs.String(), tc.code) || !strings.Contains(logs.String(), tc.want) {
				t.Fatalf("the ERROR line does not name the cause (%s, %q):\n%s", tc.code, tc.want, logs)
			}
			if v, ok := value(t, reg, "sluice_agent_last_error", map[string]string{"code": tc.code}); !ok || v != 1 {
				t.Fatalf("last_error{code=%s} = %v (present %v), want 1", tc.code, v, ok)
			}
			if v, _ := value(t, reg, "sluice_agent_sink_up", nil); v != 0 {
				t.Fatalf("sink_up = %v, want 0", v)
			}
			if err := a.Ready(); err == nil {
				t.Fatal("Ready() = nil, want an error")
			}
			if v, _ := value(t, reg, "sluice_agent_reconnects_total", nil); v != 0 {
				t.Fatalf("reconnects_total = %v after only failed attempts, want 0", v)
			}
		})
	}
}

// TestReadyAndCounters: an agent connected to a real sink is ready and
// reports sink_up 1; losing the established stream counts one reconnect,
// while failed attempts during the outage count as connect failures; the
// Sender's cumulative counts are Prometheus counters named _total.
func TestReadyAndCounters(t *testing.T) {
	dir := t.TempDir()
	ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(dir, "sink")}, "127.0.0.1:0")
	reg := prometheus.NewRegistry()
	a := newTestAgent(t, filepath.Join(dir, "spool"), func(c *Config) {
		c.SinkAddr = ts.Addr
		c.ReconnectMin, c.ReconnectMax = 10*time.Millisecond, 20*time.Millisecond
		c.Registry = reg
	})
	defer a.Close()
	testwait.For(t, "Ready", func() bool { return a.Ready() == nil })
	if v, _ := value(t, reg, "sluice_agent_sink_up", nil); v != 1 {
		t.Fatalf("sink_up = %v while connected", v)
	}
	if err := a.Ingest(context.Background(), [][]byte{[]byte("one")}); err != nil {
		t.Fatal(err)
	}
	waitAcked(t, a)
	ts.Stop()
	testwait.For(t, "failed attempts while the sink is down", func() bool {
		v, _ := value(t, reg, "sluice_agent_connect_failures_total", nil)
		return v >= 3
	})
	if err := a.Ready(); err == nil {
		t.Fatal("Ready() = nil with the sink down")
	}
	if _, ok := value(t, reg, "sluice_agent_last_error", map[string]string{"code": "Unavailable"}); !ok {
		t.Fatal("no last_error{code=Unavailable} with the sink down")
	}
	if v, _ := value(t, reg, "sluice_agent_reconnects_total", nil); v != 1 {
		t.Fatalf("reconnects_total = %v after one lost stream and several failed attempts, want 1", v)
	}
	if v, _ := value(t, reg, "sluice_agent_oldest_unacked_seconds", nil); v != 0 {
		t.Fatalf("oldest_unacked_seconds = %v with everything acknowledged, want 0", v)
	}
	if err := a.Ingest(context.Background(), [][]byte{[]byte("two")}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "an unacknowledged message to have an age", func() bool {
		v, _ := value(t, reg, "sluice_agent_oldest_unacked_seconds", nil)
		return v > 0
	})
	st := a.Stats()
	if !strings.HasPrefix(st.LastError, "Unavailable: ") || st.LastErrorAt.IsZero() || st.OldestUnacked <= 0 {
		t.Fatalf("stats while the sink is down: last error %q at %v, oldest unacknowledged %v", st.LastError, st.LastErrorAt, st.OldestUnacked)
	}
	ts.Restart()
	defer ts.Stop()
	testwait.For(t, "Ready again", func() bool { return a.Ready() == nil })
	if _, ok := value(t, reg, "sluice_agent_last_error", nil); ok {
		t.Fatal("last_error still has a series while connected")
	}
	waitAcked(t, a)
	testwait.For(t, "no unacknowledged message", func() bool {
		v, _ := value(t, reg, "sluice_agent_oldest_unacked_seconds", nil)
		return v == 0
	})
	if a.Stats().LastError != st.LastError {
		t.Fatalf("the last error %q was forgotten after reconnecting (want it kept for the status page)", a.Stats().LastError)
	}
	mfs := gather(t, reg)
	for _, name := range []string{"sluice_agent_sent_messages_total", "sluice_agent_resent_messages_total", "sluice_agent_resend_timeouts_total"} {
		mf := mfs[name]
		if mf == nil || mf.GetType() != dto.MetricType_COUNTER {
			t.Fatalf("%s: %v, want a counter", name, mf)
		}
	}
	if v, _ := value(t, reg, "sluice_agent_sent_messages_total", nil); v < 1 {
		t.Fatalf("sent_messages_total = %v after a delivery", v)
	}
	for name, mf := range mfs {
		if strings.HasSuffix(name, "_total") != (mf.GetType() == dto.MetricType_COUNTER) {
			t.Errorf("%s is a %v: counters and only counters end in _total", name, mf.GetType())
		}
		if strings.ToLower(name) != name {
			t.Errorf("%s: metric names are lower snake case (Prometheus' naming convention)", name)
		}
	}
}

// TestBrokenSpoolIsUnhealthy: after a failed fdatasync the spool takes
// nothing until the process restarts, so the agent is not only not
// ready but unhealthy (its /healthz fails, and a supervisor's liveness
// probe restarts it); a full disk, which heals by itself, at most makes
// it not ready.
func TestBrokenSpoolIsUnhealthy(t *testing.T) {
	dir := t.TempDir()
	ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(dir, "sink")}, "127.0.0.1:0")
	defer ts.Stop()
	a := newTestAgent(t, filepath.Join(dir, "spool"), func(c *Config) { c.SinkAddr = ts.Addr })
	defer a.Close()
	testwait.For(t, "Ready", func() bool { return a.Ready() == nil })
	if err := a.Healthy(); err != nil {
		t.Fatalf("Healthy() = %v on a working agent", err)
	}
	// A full disk (here: an append that failed with ENOSPC; the disk has
	// room again, so the agent is even ready) is no reason to restart.
	a.spool.AppendDone(fmt.Errorf("%w: write beyond the disk's end", syscall.ENOSPC))
	if err := a.Healthy(); err != nil {
		t.Fatalf("Healthy() = %v after ENOSPC", err)
	}
	a.spool.AppendDone(nil)
	a.spool.AppendDone(fmt.Errorf("%w: fdatasync: input/output error", seglog.ErrBroken))
	if err := a.Healthy(); err == nil || !strings.Contains(err.Error(), "needs a restart") {
		t.Fatalf("Healthy() = %v after a failed fdatasync", err)
	}
	// The log itself refuses appends then (seglog's
	// TestSyncFailureBreaksLog); ingest is refused before it gets there.
	if err := a.SpoolWritable(); err == nil || a.Ready() == nil {
		t.Fatalf("after a failed fdatasync: writable %v, ready %v", err, a.Ready())
	}
}

// TestUnreadableSpoolIsUnhealthy: a spooled message the driver cannot
// read back (bytes on disk changed after the start-up check; the driver
// parks the message, see TestUnreadableSpoolRecordIsParked in
// internal/agent/driver) makes the agent unhealthy, so a supervisor
// restarts it into the start-up check that names the damage. The spool
// still takes appends: the agent stays ready until then.
func TestUnreadableSpoolIsUnhealthy(t *testing.T) {
	a := newTestAgent(t, t.TempDir(), nil)
	defer a.Close()
	if err := a.Healthy(); err != nil {
		t.Fatalf("Healthy() = %v on a working agent", err)
	}
	a.spool.ReadFailed(fmt.Errorf("message 3: %w", &seglog.CorruptionError{File: "00000000000000000000.seg", Pos: 42, Offset: 3, Reason: "checksum mismatch"}))
	if err := a.Healthy(); err == nil || !strings.Contains(err.Error(), "needs a restart") || !strings.Contains(err.Error(), "byte 42") {
		t.Fatalf("Healthy() = %v after a record could not be read back", err)
	}
	if err := a.SpoolWritable(); err != nil {
		t.Fatalf("SpoolWritable() = %v: an unreadable record does not stop appends", err)
	}
}
