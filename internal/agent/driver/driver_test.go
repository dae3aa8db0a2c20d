package driver

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/agent/metrics"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/delivery"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/transport/memconn"
	"github.com/sluicehq/sluice/seglog"
)

var quiet = slog.New(slog.DiscardHandler)

// sink is a protocol.Service that records what it receives and
// acknowledges each message unless drop says to lose that copy.
type sink struct {
	drop func(session int, id uint64, copies int) bool
	// codec, when set, is the Welcome.Codec of each session; endAfter,
	// when set, ends a session once it has acknowledged message id.
	codec    func(session int) protocol.Codec
	endAfter func(session int, id uint64) bool
	// refuse, when set, refuses message id for good (ERROR_CODE_OVERSIZE)
	// instead of acknowledging it.
	refuse func(session int, id uint64) bool
	// olderHello, when set, refuses a Hello that carries SentBelow with
	// it as the error a sink from before the field answers (over RSocket).
	olderHello error

	mu       sync.Mutex
	sessions int
	got      map[uint64][]byte // first payload of each id
	copies   map[uint64]int
	frames   []protocol.Message
	hellos   []protocol.Hello // each session's Hello, its Codecs copied
	// differ counts copies whose payload differs from the first copy's.
	differ int
}

func newSink() *sink { return &sink{got: map[uint64][]byte{}, copies: map[uint64]int{}} }

func (s *sink) ServeRead(protocol.Conn) error {
	return protocol.Errorf(protocol.StatusInvalid, "no reads")
}

func (s *sink) ServeSend(c protocol.Conn) error {
	f, err := c.Recv()
	if err != nil {
		return nil
	}
	s.mu.Lock()
	s.sessions++
	n := s.sessions
	if h, ok := f.(*protocol.Hello); ok {
		hc := *h
		hc.Codecs = slices.Clone(h.Codecs)
		s.hellos = append(s.hellos, hc)
		if s.olderHello != nil && h.HasSentBelow {
			s.mu.Unlock()
			return s.olderHello
		}
	}
	s.mu.Unlock()
	w := &protocol.Welcome{Version: protocol.Version, Credits: protocol.Credits{Messages: 1 << 20, Bytes: 1 << 40}}
	if s.codec != nil {
		w.Codec = s.codec(n)
	}
	if err := c.Send(w); err != nil {
		return nil
	}
	for {
		f, err := c.Recv()
		if err != nil {
			return nil
		}
		m, ok := f.(*protocol.Message)
		if !ok {
			continue
		}
		s.mu.Lock()
		s.copies[m.ID]++
		k := s.copies[m.ID]
		if first, seen := s.got[m.ID]; !seen {
			s.got[m.ID] = bytes.Clone(m.Payload)
		} else if !bytes.Equal(first, m.Payload) {
			s.differ++
		}
		s.frames = append(s.frames, protocol.Message{ID: m.ID, Records: m.Records, Codec: m.Codec, DictID: m.DictID})
		s.mu.Unlock()
		if s.drop != nil && s.drop(n, m.ID, k) {
			continue
		}
		if s.refuse != nil && s.refuse(n, m.ID) {
			if err := c.Send(&protocol.Error{MessageID: m.ID, Code: protocol.CodeOversize, Detail: "test: too large for the store"}); err != nil {
				return nil
			}
			continue
		}
		if err := c.Send(&protocol.Ack{Ranges: []protocol.IDRange{{First: m.ID, Last: m.ID}}}); err != nil {
			return nil
		}
		if s.endAfter != nil && s.endAfter(n, m.ID) {
			return nil
		}
	}
}

// rig is a driver over a real spool and memconn, with no ingest: the test
// appends spool records itself and announces them as the spool writer
// would.
type rig struct {
	sp     *spool.Spool
	m      *metrics.Metrics
	d      *Driver
	cancel context.CancelFunc
	bodies map[uint64][]byte
	origin time.Time
	// fresh: announce each message with its record, as the spool writer
	// does, so the driver sends it from memory; otherwise it reads the
	// spool, as for a backlog.
	fresh bool
}

func newRig(t *testing.T, svc protocol.Service, sc delivery.SenderConfig) *rig {
	t.Helper()
	return newRigWith(t, svc, sc, nil)
}

// newRigWith is newRig with mod applied to the driver's Config.
func newRigWith(t *testing.T, svc protocol.Service, sc delivery.SenderConfig, mod func(*Config)) *rig {
	t.Helper()
	sp, err := spool.Open(t.TempDir(), 0, "", quiet, seglog.WithSync(seglog.SyncNone()))
	if err != nil {
		t.Fatal(err)
	}
	s, err := delivery.NewSender(sc)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{sp: sp, m: metrics.New(nil), bodies: map[uint64][]byte{}, origin: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	cfg := memConfig(svc, r.now)
	if mod != nil {
		mod(&cfg)
	}
	r.d = Start(ctx, cfg, s, sp, r.m, nil)
	t.Cleanup(func() {
		r.cancel()
		<-r.d.Done()
		sp.Close()
	})
	return r
}

func (r *rig) now() int64 { return int64(time.Since(r.origin)) }

// memConfig is the driver's Config of these tests: one in-memory sink
// (svc), plain messages, the clock now.
func memConfig(svc protocol.Service, now func() int64) Config {
	return Config{
		Dialers: []protocol.Dialer{&memconn.Dialer{Service: svc}}, Addrs: []string{"mem"},
		Compression: codec.Plain, MaxMessageBytes: 1 << 20, HandshakeTimeout: 10 * time.Second,
		Logger: quiet, Now: now,
	}
}

// sinceStart is a clock for memConfig that starts now.
func sinceStart() func() int64 {
	origin := time.Now()
	return func() int64 { return int64(time.Since(origin)) }
}

// spool appends one plain message of the given records and announces it.
func (r *rig) spool(t *testing.T, recs ...string) uint64 {
	t.Helper()
	var b batch.Builder
	for _, rec := range recs {
		if err := b.Add([]byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	body := bytes.Clone(b.Bytes())
	rec := spool.GetBuf()
	*rec = spool.Append(*rec, spool.Record{Kind: codec.Plain, Records: uint32(len(recs)), Body: body})
	id, err := r.sp.Log().Append([][]byte{*rec})
	if err != nil {
		t.Fatal(err)
	}
	r.bodies[id] = body
	in := spool.Spooled{ID: id, Size: int64(len(body)), Records: len(recs), Raw: len(body), At: r.now()}
	if r.fresh {
		in.Rec = rec
	}
	r.d.Spooled([]spool.Spooled{in})
	return id
}

// spoolRecord appends one message of kind with body as it is (the driver
// does not look into bodies) and announces it.
func (r *rig) spoolRecord(t *testing.T, kind codec.Kind, records int, body []byte) uint64 {
	t.Helper()
	rec := spool.GetBuf()
	*rec = spool.Append(*rec, spool.Record{Kind: kind, Records: uint32(records), Body: body})
	id, err := r.sp.Log().Append([][]byte{*rec})
	if err != nil {
		t.Fatal(err)
	}
	r.bodies[id] = body
	in := spool.Spooled{ID: id, Size: int64(len(body)), Records: records, Raw: len(body), At: r.now()}
	if r.fresh {
		in.Rec = rec
	} else {
		spool.PutBuf(rec)
	}
	r.d.Spooled([]spool.Spooled{in})
	return id
}

// waitWatermark waits until the persisted watermark reaches w.
func (r *rig) waitWatermark(t *testing.T, w uint64) {
	t.Helper()
	if !testwait.Until(func() bool { return r.sp.AckedWatermark() >= w }) {
		t.Fatalf("watermark %d, want %d: %+v", r.sp.AckedWatermark(), w, r.m.Snapshot(false))
	}
}

// TestSendsSpoolBytes: each message goes out under its spool offset with
// the spooled body as it is (no decoding or re-encoding), its record
// count and codec; acks move the persisted watermark.
func TestSendsSpoolBytes(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		t.Run(fmt.Sprint("fresh=", fresh), func(t *testing.T) { testSendsSpoolBytes(t, fresh) })
	}
}

func testSendsSpoolBytes(t *testing.T, fresh bool) {
	svc := newSink()
	r := newRig(t, svc, delivery.SenderConfig{})
	r.fresh = fresh
	for i := range 10 {
		r.spool(t, fmt.Sprintf("a-%d", i), fmt.Sprintf("b-%d", i))
	}
	r.waitWatermark(t, 10)
	svc.mu.Lock()
	defer svc.mu.Unlock()
	for id, want := range r.bodies {
		if !bytes.Equal(svc.got[id], want) {
			t.Errorf("message %d: payload %q, want the spooled body %q", id, svc.got[id], want)
		}
	}
	for _, f := range svc.frames {
		if f.Records != 2 || f.Codec != protocol.CodecPlain || f.DictID != 0 {
			t.Errorf("frame %+v", f)
		}
	}
	if st := r.m.Snapshot(false); st.AckedMessages != 10 || st.AckedRecords != 20 {
		t.Errorf("acked %d messages, %d records; want 10, 20", st.AckedMessages, st.AckedRecords)
	}
	if err := r.d.Ready(); err != nil {
		t.Errorf("Ready: %v", err)
	}
}

// TestResendFromTick: a copy lost without the session breaking is sent
// again when the Sender's resend deadline passes, which only the driver's
// one timer at NextDeadline can notice; the session stays up. The first
// copy goes out from memory, the resend is read back from the spool, and
// both carry the same bytes.
func TestResendFromTick(t *testing.T) {
	svc := newSink()
	svc.drop = func(_ int, _ uint64, copies int) bool { return copies == 1 }
	r := newRig(t, svc, delivery.SenderConfig{MinRTO: 20 * time.Millisecond, InitialRTO: 20 * time.Millisecond, ProgressTimeout: time.Hour})
	r.fresh = true
	r.spool(t, "x")
	r.spool(t, "y")
	r.waitWatermark(t, 2)
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if svc.sessions != 1 {
		t.Errorf("%d sessions: the resend must not need a reconnect", svc.sessions)
	}
	for id, n := range svc.copies {
		if n != 2 {
			t.Errorf("message %d sent %d times, want 2", id, n)
		}
	}
	if svc.differ != 0 {
		t.Errorf("%d resends differ from the first copy", svc.differ)
	}
}

// TestStopPersists: ending the driver's context stops it, with the
// newest acknowledged watermark persisted (not only every 100ms).
func TestStopPersists(t *testing.T) {
	svc := newSink()
	r := newRig(t, svc, delivery.SenderConfig{})
	r.spool(t, "one")
	testwait.For(t, "an ack", func() bool { return r.m.Snapshot(false).AckedMessages >= 1 })
	r.cancel()
	<-r.d.Done()
	if w := r.sp.AckedWatermark(); w != 1 {
		t.Fatalf("watermark %d after stop, want 1", w)
	}
}

// TestSpooledAfterStop: the spool writer may still report messages after
// the driver stopped (an agent closing); they are left in the spool for
// the next start, without blocking the caller or sending anything.
func TestSpooledAfterStop(t *testing.T) {
	svc := newSink()
	r := newRig(t, svc, delivery.SenderConfig{})
	r.fresh = true
	r.cancel()
	<-r.d.Done()
	r.spool(t, "late") // returns: Spooled does not block on a stopped driver
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if len(svc.frames) != 0 {
		t.Fatalf("a stopped driver sent %d messages", len(svc.frames))
	}
	if w := r.sp.AckedWatermark(); w != 0 {
		t.Fatalf("watermark %d: a message spooled after the stop is not acknowledged", w)
	}
}

// TestBacklogBeforeSpooled: messages spooled before the start (the
// backlog) and one reported by Spooled right after Start returns reach
// the Sender in id order, so all are delivered. Before the backlog was
// stepped inside Start, the new one could come first and be refused.
func TestBacklogBeforeSpooled(t *testing.T) {
	sp, err := spool.Open(t.TempDir(), 0, "", quiet, seglog.WithSync(seglog.SyncNone()))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	var backlog []spool.Spooled
	for _, rec := range []string{"b1", "b2", "b3"} {
		backlog = append(backlog, appendPlain(t, sp, rec))
	}
	s, err := delivery.NewSender(delivery.SenderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	svc := newSink()
	m := metrics.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	d := Start(ctx, memConfig(svc, sinceStart()), s, sp, m, backlog)
	d.Spooled([]spool.Spooled{appendPlain(t, sp, "new")})
	if !testwait.Until(func() bool { return sp.AckedWatermark() >= 4 && m.Snapshot(false).AckedMessages >= 4 }) {
		t.Fatalf("acked %d messages, watermark %d; want all 4", m.Snapshot(false).AckedMessages, sp.AckedWatermark())
	}
	cancel()
	<-d.Done()
}

// appendPlain appends a plain message of one record to sp and returns
// what the spool writer would report for it.
func appendPlain(t *testing.T, sp *spool.Spool, rec string) spool.Spooled {
	t.Helper()
	var b batch.Builder
	if err := b.Add([]byte(rec)); err != nil {
		t.Fatal(err)
	}
	body := bytes.Clone(b.Bytes())
	r := spool.Append(nil, spool.Record{Kind: codec.Plain, Records: 1, Body: body})
	id, err := sp.Log().Append([][]byte{r})
	if err != nil {
		t.Fatal(err)
	}
	return spool.Spooled{ID: id, Size: int64(len(body)), Records: 1, Raw: len(body)}
}

// TestKafkaCodecNegotiated: the Hello lists CodecKafkaZstd; each Welcome
// tells the agent (Config.SealKafka) whether to seal new messages as Kafka
// records sections — on when the sink asks for CodecKafkaZstd, off again
// when the next session's sink (a failover) does not. A message spooled
// as codec.KafkaZstd goes out as CodecKafkaZstd, fresh or read back from
// the spool, to a sink that asked; to one that did not (it may be older
// than the codec, and would refuse it for good) it goes as the zstd batch
// of the same records.
func TestKafkaCodecNegotiated(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		t.Run(fmt.Sprint("fresh=", fresh), func(t *testing.T) {
			svc := newSink()
			svc.codec = func(session int) protocol.Codec {
				if session == 1 {
					return protocol.CodecKafkaZstd
				}
				return protocol.CodecUnspecified
			}
			svc.endAfter = func(session int, id uint64) bool { return session == 1 && id == 0 }
			var mu sync.Mutex
			var told []bool
			r := newRigWith(t, svc, delivery.SenderConfig{ReconnectMin: time.Millisecond, ReconnectMax: 10 * time.Millisecond},
				func(c *Config) {
					c.SealKafka = func(on bool) { mu.Lock(); told = append(told, on); mu.Unlock() }
				})
			r.fresh = fresh
			agent := r.sp.ID()
			r.spoolRecord(t, codec.KafkaZstd, 3, sinkclient.KafkaZstdPayload(t, agent, 0, "a", "b", "c"))
			r.waitWatermark(t, 1)
			testwait.For(t, "a second session", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(told) >= 2
			})
			r.spoolRecord(t, codec.KafkaZstd, 2, sinkclient.KafkaZstdPayload(t, agent, 1, "d", "e")) // spooled so before the failover
			r.spoolRecord(t, codec.Zstd, 1, []byte("zstd-2"))
			r.waitWatermark(t, 3)
			mu.Lock()
			if !slices.Equal(told, []bool{true, false}) {
				t.Errorf("SealKafka told %v, want [true false] (session 1 asks, session 2 does not)", told)
			}
			mu.Unlock()
			svc.mu.Lock()
			defer svc.mu.Unlock()
			for _, h := range svc.hellos {
				if !slices.Contains(h.Codecs, protocol.CodecKafkaZstd) {
					t.Errorf("Hello lists %v, want CodecKafkaZstd among them", h.Codecs)
				}
			}
			want := map[uint64]protocol.Codec{0: protocol.CodecKafkaZstd, 1: protocol.CodecZstd, 2: protocol.CodecZstd}
			for _, f := range svc.frames {
				if f.Codec != want[f.ID] {
					t.Errorf("message %d sent as %v, want %v", f.ID, f.Codec, want[f.ID])
				}
			}
			for id, body := range r.bodies {
				if id == 1 {
					continue
				}
				if !bytes.Equal(svc.got[id], body) {
					t.Errorf("message %d: payload %q, want %q", id, svc.got[id], body)
				}
			}
			got, err := codec.NewDecoder(1<<20).Decode(nil, svc.got[1], codec.Zstd, 0)
			if err != nil {
				t.Fatalf("message 1 sent as zstd does not decompress: %v", err)
			}
			var recs []string
			if err := batch.Decode(got, func(rec []byte) error { recs = append(recs, string(rec)); return nil }); err != nil || !slices.Equal(recs, []string{"d", "e"}) {
				t.Errorf("message 1 as zstd holds %q (%v), want [d e]", recs, err)
			}
		})
	}
}
