package driver

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/agent/metrics"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/delivery"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/transport/memconn"
	"github.com/sluicehq/sluice/seglog"
)

var quiet = slog.New(slog.DiscardHandler)

// sink is a protocol.Service that records what it receives and
// acknowledges each message unless drop says to lose that copy.
type sink struct {
	drop func(session int, id uint64, copies int) bool

	mu       sync.Mutex
	sessions int
	got      map[uint64][]byte // first payload of each id
	copies   map[uint64]int
	frames   []protocol.Message
	// differ counts copies whose payload differs from the first copy's.
	differ int
}

func newSink() *sink { return &sink{got: map[uint64][]byte{}, copies: map[uint64]int{}} }

func (s *sink) ServeRead(protocol.Conn) error {
	return protocol.Errorf(protocol.StatusInvalid, "no reads")
}

func (s *sink) ServeSend(c protocol.Conn) error {
	if _, err := c.Recv(); err != nil {
		return nil
	}
	s.mu.Lock()
	s.sessions++
	n := s.sessions
	s.mu.Unlock()
	if err := c.Send(&protocol.Welcome{Version: protocol.Version, Credits: protocol.Credits{Messages: 1 << 20, Bytes: 1 << 40}}); err != nil {
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
		if err := c.Send(&protocol.Ack{Ranges: []protocol.IDRange{{First: m.ID, Last: m.ID}}}); err != nil {
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
	r.d = Start(ctx, Config{
		Dialers: []protocol.Dialer{&memconn.Dialer{Service: svc}}, Addrs: []string{"mem"},
		Compression: codec.Plain, MaxMessageBytes: 1 << 20, HandshakeTimeout: 10 * time.Second,
		Logger: quiet, Now: r.now,
	}, s, sp, r.m, nil)
	t.Cleanup(func() {
		r.cancel()
		<-r.d.Done()
		sp.Close()
	})
	return r
}

func (r *rig) now() int64 { return int64(time.Since(r.origin)) }

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
	origin := time.Now()
	d := Start(ctx, Config{
		Dialers: []protocol.Dialer{&memconn.Dialer{Service: svc}}, Addrs: []string{"mem"},
		Compression: codec.Plain, MaxMessageBytes: 1 << 20, HandshakeTimeout: 10 * time.Second,
		Logger: quiet, Now: func() int64 { return int64(time.Since(origin)) },
	}, s, sp, m, backlog)
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
