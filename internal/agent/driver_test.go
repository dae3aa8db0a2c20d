package agent

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/testkit/syncbuf"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/transport/memconn"
)

// The tests in this file drive the agent's delivery (the dial, the
// writer, the loop around delivery.Sender) against a fake sink that
// implements protocol.Service, over memconn: no network, no gRPC, and the
// fake decides frame by frame what the sink does.

// fakeService is a scripted sink. hello answers a session's Hello (nil:
// a Welcome with a large window); message answers one Message (nil: an
// Ack of it); either may end the session by returning an error.
type fakeService struct {
	hello   func(session int, h *protocol.Hello) (protocol.Frame, error)
	message func(session int, m *protocol.Message, copies int) (protocol.Frame, error)
	// grant, when set, follows every Ack with a Credit frame carrying
	// what it returns (credits are cumulative per session).
	grant func(received uint64) *protocol.Credits

	mu       sync.Mutex
	sessions int
	hellos   []protocol.Hello
	frames   [][]string     // per session, the names of the frames received
	copies   map[uint64]int // per message id, how often it arrived
	stored   map[string]int // records of acknowledged messages
	dec      *codec.Decoder
}

func newFakeService() *fakeService {
	return &fakeService{copies: map[uint64]int{}, stored: map[string]int{}, dec: codec.NewDecoder(8 << 20)}
}

// skipReply, returned by a message hook, sends nothing for that message.
var skipReply protocol.Frame = &protocol.Credit{}

func bigWelcome() *protocol.Welcome {
	return &protocol.Welcome{Version: protocol.Version, Credits: protocol.Credits{Messages: 1 << 20, Bytes: 1 << 40}}
}

func (f *fakeService) ServeRead(protocol.Conn) error {
	return protocol.Errorf(protocol.StatusInvalid, "the fake sink does not read")
}

func (f *fakeService) ServeSend(c protocol.Conn) error {
	fr, err := c.Recv()
	if err != nil {
		return nil
	}
	h, ok := fr.(*protocol.Hello)
	if !ok {
		return protocol.Errorf(protocol.StatusInvalid, "first frame %s", protocol.Name(fr))
	}
	f.mu.Lock()
	f.sessions++
	n := f.sessions
	f.hellos = append(f.hellos, *h)
	f.frames = append(f.frames, nil)
	f.mu.Unlock()
	var reply protocol.Frame = bigWelcome()
	if f.hello != nil {
		if reply, err = f.hello(n, h); err != nil {
			return err
		}
	}
	if reply == nil { // silent: wait for the agent to give up
		<-c.Context().Done()
		return nil
	}
	if err := c.Send(reply); err != nil {
		return nil
	}
	for {
		fr, err := c.Recv()
		if err != nil {
			return nil
		}
		f.mu.Lock()
		f.frames[n-1] = append(f.frames[n-1], protocol.Name(fr))
		f.mu.Unlock()
		m, ok := fr.(*protocol.Message)
		if !ok {
			continue
		}
		f.mu.Lock()
		f.copies[m.ID]++
		copies := f.copies[m.ID]
		f.mu.Unlock()
		var resp protocol.Frame
		if f.message != nil {
			if resp, err = f.message(n, m, copies); err != nil {
				return err
			}
		}
		if resp == skipReply {
			continue
		}
		if resp == nil {
			if err := f.store(m); err != nil {
				return err
			}
			resp = &protocol.Ack{Ranges: []protocol.IDRange{{First: m.ID, Last: m.ID}}}
		}
		if err := c.Send(resp); err != nil {
			return nil
		}
		if f.grant != nil {
			f.mu.Lock()
			var total uint64
			for _, n := range f.copies {
				total += uint64(n)
			}
			f.mu.Unlock()
			if err := c.Send(&protocol.Credit{Credits: f.grant(total)}); err != nil {
				return nil
			}
		}
	}
}

// store decodes m and counts its records, once per message id.
func (f *fakeService) store(m *protocol.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.copies[m.ID] > 1 && f.stored[fmt.Sprint("#", m.ID)] > 0 {
		return nil // a duplicate: deduplicated, as a sink does
	}
	body, err := f.dec.Decode(nil, m.Payload, codec.Kind(m.Codec), m.DictID)
	if err != nil {
		return protocol.Errorf(protocol.StatusInvalid, "message %d: %v", m.ID, err)
	}
	n := uint32(0)
	if err := batch.Decode(body, func(r []byte) error { f.stored[string(r)]++; n++; return nil }); err != nil {
		return protocol.Errorf(protocol.StatusInvalid, "message %d: %v", m.ID, err)
	}
	if n != m.Records {
		return protocol.Errorf(protocol.StatusInvalid, "message %d says %d records, holds %d", m.ID, m.Records, n)
	}
	f.stored[fmt.Sprint("#", m.ID)]++
	return nil
}

func (f *fakeService) snapshot() (sessions int, stored map[string]int, copies map[uint64]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	stored = map[string]int{}
	for k, v := range f.stored {
		if !strings.HasPrefix(k, "#") {
			stored[k] = v
		}
	}
	copies = map[uint64]int{}
	for k, v := range f.copies {
		copies[k] = v
	}
	return f.sessions, stored, copies
}

// newMemAgent starts an agent delivering to svc over memconn.
func newMemAgent(t *testing.T, svc protocol.Service, mod func(*Config)) (*Agent, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	a := newTestAgent(t, filepath.Join(t.TempDir(), "spool"), func(c *Config) {
		c.SinkAddr, c.Dialer, c.Registry = "", &memconn.Dialer{Service: svc}, reg
		c.ReconnectMin, c.ReconnectMax = time.Millisecond, 10*time.Millisecond
		c.Linger = time.Millisecond
		if mod != nil {
			mod(c)
		}
	})
	t.Cleanup(func() { a.Close() })
	return a, reg
}

func ingestN(t *testing.T, a *Agent, tag string, n int) map[string]int {
	t.Helper()
	want := map[string]int{}
	for i := range n {
		r := fmt.Sprintf("%s-%d", tag, i)
		want[r]++
		if err := a.Ingest(context.Background(), [][]byte{[]byte(r)}); err != nil {
			t.Fatal(err)
		}
	}
	return want
}

func sameCounts(t *testing.T, got, want map[string]int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("sink holds %d distinct records, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("record %q stored %d times, want %d", k, got[k], v)
		}
	}
}

// TestDriverDelivers: every ingested record reaches the sink exactly once
// and the spool is acknowledged; the Hello names the agent and the codecs.
func TestDriverDelivers(t *testing.T) {
	for _, k := range []codec.Kind{codec.Plain, codec.Zstd} {
		t.Run(k.String(), func(t *testing.T) {
			svc := newFakeService()
			a, reg := newMemAgent(t, svc, func(c *Config) { c.Compression = k })
			want := ingestN(t, a, "rec", 50)
			waitAcked(t, a)
			sessions, stored, _ := svc.snapshot()
			sameCounts(t, stored, want)
			if sessions != 1 {
				t.Errorf("%d sessions, want 1", sessions)
			}
			svc.mu.Lock()
			h := svc.hellos[0]
			svc.mu.Unlock()
			if h.AgentID != a.ID() || h.Version != protocol.Version || len(h.Codecs) != 4 {
				t.Errorf("Hello %+v", h)
			}
			if v, _ := value(t, reg, "sluice_agent_sink_up", nil); v != 1 {
				t.Errorf("sink_up = %v", v)
			}
			if err := a.Ready(); err != nil {
				t.Errorf("Ready: %v", err)
			}
		})
	}
}

// TestDriverRetryableRejection: the sink refuses the first copy of every
// message with a retryable Error (its store is down for a moment); the
// Sender sends each again on the same session and the sink stores it.
func TestDriverRetryableRejection(t *testing.T) {
	svc := newFakeService()
	svc.message = func(_ int, m *protocol.Message, copies int) (protocol.Frame, error) {
		if copies == 1 {
			return &protocol.Error{MessageID: m.ID, Code: protocol.CodeStoreUnavailable, Detail: "flush failed", Retryable: true}, nil
		}
		return nil, nil
	}
	a, reg := newMemAgent(t, svc, func(c *Config) { c.MinRTO = 50 * time.Millisecond })
	want := ingestN(t, a, "rej", 5)
	waitAcked(t, a)
	sessions, stored, copies := svc.snapshot()
	sameCounts(t, stored, want)
	for id, n := range copies {
		if n < 2 {
			t.Errorf("message %d arrived %d times, want at least 2", id, n)
		}
	}
	if sessions != 1 {
		t.Errorf("%d sessions: a refused message must not end the session", sessions)
	}
	if v, ok := value(t, reg, "sluice_agent_rejected_messages_total", map[string]string{"code": "ERROR_CODE_STORE_UNAVAILABLE"}); !ok || v < float64(len(copies)) {
		t.Errorf("rejected_messages_total{STORE_UNAVAILABLE} = %v (present %v), want >= %d", v, ok, len(copies))
	}
}

// TestDriverReconnectsAndResends: the sink ends the first session with
// Unavailable after taking a message without acknowledging it; the agent
// reconnects, resends from its watermark, and everything is stored once.
// The lost session counts as one reconnect.
func TestDriverReconnectsAndResends(t *testing.T) {
	svc := newFakeService()
	svc.message = func(session int, m *protocol.Message, _ int) (protocol.Frame, error) {
		if session == 1 {
			return nil, protocol.Errorf(protocol.StatusUnavailable, "sink shutting down")
		}
		return nil, nil
	}
	a, reg := newMemAgent(t, svc, nil)
	want := ingestN(t, a, "re", 10)
	waitAcked(t, a)
	sessions, stored, _ := svc.snapshot()
	sameCounts(t, stored, want)
	if sessions < 2 {
		t.Fatalf("%d sessions, want a reconnect", sessions)
	}
	if v, _ := value(t, reg, "sluice_agent_reconnects_total", nil); v != 1 {
		t.Errorf("reconnects_total = %v, want 1", v)
	}
	svc.mu.Lock()
	first := svc.hellos[0].Watermark
	svc.mu.Unlock()
	if first != 0 {
		t.Errorf("first Hello's watermark %d, want 0", first)
	}
}

// TestDriverRefusals: a sink that refuses the agent's identity, one that
// speaks another protocol version, one that answers the Hello with
// something else, and one that never answers are each reported under
// their own code, once at ERROR for the permanent ones, and the agent is
// not ready; nothing is lost from the spool.
func TestDriverRefusals(t *testing.T) {
	for _, tc := range []struct {
		code      string
		hello     func(int, *protocol.Hello) (protocol.Frame, error)
		permanent bool
	}{
		{"PermissionDenied", func(int, *protocol.Hello) (protocol.Frame, error) {
			return nil, protocol.Errorf(protocol.StatusPermissionDenied, "this token may not send as agent x")
		}, true},
		{"Unauthenticated", func(int, *protocol.Hello) (protocol.Frame, error) {
			return nil, protocol.Errorf(protocol.StatusUnauthenticated, "no token")
		}, true},
		{"Invalid", func(int, *protocol.Hello) (protocol.Frame, error) {
			return nil, protocol.Errorf(protocol.StatusInvalid, "bad hello")
		}, true},
		{"VersionMismatch", func(int, *protocol.Hello) (protocol.Frame, error) {
			return &protocol.Welcome{Version: protocol.Version + 1}, nil
		}, true},
		{"Unavailable", func(int, *protocol.Hello) (protocol.Frame, error) {
			return &protocol.Ack{}, nil // not a Welcome: the attempt fails, transiently
		}, false},
		{"HandshakeTimeout", func(int, *protocol.Hello) (protocol.Frame, error) { return nil, nil }, false},
		{"ResourceExhausted", func(int, *protocol.Hello) (protocol.Frame, error) {
			return nil, protocol.Errorf(protocol.StatusResourceExhausted, "too many sessions")
		}, false},
	} {
		t.Run(tc.code, func(t *testing.T) {
			svc := newFakeService()
			svc.hello = tc.hello
			logs := &syncbuf.Buffer{}
			a, reg := newMemAgent(t, svc, func(c *Config) {
				// Only the case whose sink never answers waits for the
				// handshake timeout, shortened so that it fails fast. The
				// others keep the default: with a short one, a loaded
				// machine timed their handshakes out first and the last
				// error was HandshakeTimeout, not theirs (a CI run,
				// 2026-11-28: Unavailable).
				if tc.code == "HandshakeTimeout" {
					c.HandshakeTimeout = 50 * time.Millisecond
				}
				c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			})
			ingestN(t, a, "kept", 3)
			testwait.For(t, "several refused attempts", func() bool {
				v, _ := value(t, reg, "sluice_agent_connect_failures_total", nil)
				return v >= 3
			})
			if v, ok := value(t, reg, "sluice_agent_last_error", map[string]string{"code": tc.code}); !ok || v != 1 {
				t.Fatalf("last_error{code=%s} = %v (present %v):\n%s", tc.code, v, ok, logs)
			}
			if n := strings.Count(logs.String(), "level=ERROR"); tc.permanent && n != 1 || !tc.permanent && n != 0 {
				t.Fatalf("%d ERROR lines (permanent: %v):\n%s", n, tc.permanent, logs)
			}
			if a.Ready() == nil {
				t.Fatal("ready while every attempt fails")
			}
			if got := len(spooledRecords(t, a)); got != 3 {
				t.Fatalf("%d records left in the spool, want 3", got)
			}
		})
	}
}

// TestDriverCredits: a sink that grants one message at a time (a Welcome
// with a credit of 1, then a Credit after each Ack) never receives a
// message beyond its grant, and gets everything.
func TestDriverCredits(t *testing.T) {
	svc := newFakeService()
	var mu sync.Mutex
	var received, granted uint64 = 0, 1
	violations := 0
	svc.hello = func(int, *protocol.Hello) (protocol.Frame, error) {
		return &protocol.Welcome{Version: protocol.Version, Credits: protocol.Credits{Messages: 1, Bytes: 1 << 30}}, nil
	}
	svc.message = func(_ int, m *protocol.Message, _ int) (protocol.Frame, error) {
		mu.Lock()
		defer mu.Unlock()
		if received++; received > granted {
			violations++
		}
		return nil, nil
	}
	svc.grant = func(total uint64) *protocol.Credits {
		mu.Lock()
		defer mu.Unlock()
		granted = total + 1
		return &protocol.Credits{Messages: granted, Bytes: 1 << 30}
	}
	a, _ := newMemAgent(t, svc, nil)
	want := map[string]int{}
	for i := range 20 {
		r := fmt.Sprintf("w-%d", i)
		want[r] = 1
		// IngestMessage: one message per call, so there are many.
		if err := a.IngestMessage(context.Background(), [][]byte{[]byte(r)}); err != nil {
			t.Fatal(err)
		}
	}
	waitAcked(t, a)
	_, stored, _ := svc.snapshot()
	sameCounts(t, stored, want)
	mu.Lock()
	defer mu.Unlock()
	if violations > 0 {
		t.Fatalf("%d messages arrived beyond the credit granted", violations)
	}
}

// TestDriverProgressDeadline: a sink that takes messages and never
// acknowledges them is dropped after the progress deadline, and the
// next session (which acknowledges) gets everything.
func TestDriverProgressDeadline(t *testing.T) {
	svc := newFakeService()
	svc.message = func(session int, m *protocol.Message, _ int) (protocol.Frame, error) {
		if session == 1 {
			return &protocol.Credit{}, nil // an answer that acknowledges nothing
		}
		return nil, nil
	}
	a, reg := newMemAgent(t, svc, func(c *Config) {
		c.ProgressTimeout, c.MinRTO = 100*time.Millisecond, 30*time.Second
	})
	want := ingestN(t, a, "stuck", 4)
	waitAcked(t, a)
	_, stored, _ := svc.snapshot()
	sameCounts(t, stored, want)
	if _, ok := value(t, reg, "sluice_agent_reconnects_total", nil); !ok {
		t.Fatal("no reconnects_total")
	}
	if v, _ := value(t, reg, "sluice_agent_reconnects_total", nil); v < 1 {
		t.Fatalf("reconnects_total = %v: the stalled session must be dropped", v)
	}
}

// TestDriverDictionaryUpload: with dictionary compression, a sink that
// does not have the dictionary gets it in a Dictionary frame before the
// first message of the session; one that has it does not.
func TestDriverDictionaryUpload(t *testing.T) {
	var samples [][]byte
	for i := range 200 {
		samples = append(samples, []byte(fmt.Sprintf(`{"host":"web-%d","level":"info","msg":"request served","status":200,"bytes":%d}`, i%7, i*13)))
	}
	dict, err := codec.Train(samples, 4<<10)
	if err != nil {
		t.Skipf("cannot train a dictionary here: %v", err)
	}
	for _, has := range []bool{false, true} {
		t.Run(fmt.Sprint("sink has it: ", has), func(t *testing.T) {
			svc := newFakeService()
			if err := svc.dec.AddDictionary(dict); err != nil {
				t.Fatal(err)
			}
			svc.hello = func(int, *protocol.Hello) (protocol.Frame, error) {
				w := bigWelcome()
				if has {
					w.DictionaryIDs = []uint32{dict.ID}
				}
				return w, nil
			}
			a, _ := newMemAgent(t, svc, func(c *Config) { c.Dictionary = &dict })
			want := ingestN(t, a, `{"host":"web-1","level":"info"}`, 5)
			waitAcked(t, a)
			_, stored, _ := svc.snapshot()
			sameCounts(t, stored, want)
			svc.mu.Lock()
			frames := svc.frames[0]
			svc.mu.Unlock()
			if got := frames[0] == "Dictionary"; got != !has {
				t.Fatalf("frames of the session: %v", frames)
			}
		})
	}
}
