package driver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/internal/agent/metrics"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/delivery"
	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/seglog"
)

// rejected is the agent's rejected_messages_total for code.
// wantParkedAlone checks what a message id the session writer cannot send
// (what, refused with code) must leave, in a spool of it and three good
// messages: one session, which went on and acknowledged the three, the
// message refused once with code and parked, and never sent. It waits for
// the acks, or for a second session (what the writer did before: close).
func wantParkedAlone(t *testing.T, svc *sink, m *metrics.Metrics, d *Driver, code string, id uint64, what string) {
	t.Helper()
	testwait.For(t, "the good messages acknowledged, or a reconnect", func() bool {
		return (m.Snapshot(false).AckedMessages >= 3 && rejected(m, code) >= 1) || svc.sessionCount() >= 2
	})
	if n := svc.sessionCount(); n != 1 {
		t.Fatalf("%d sessions: the %s ended the session (acked %d messages)", n, what, m.Snapshot(false).AckedMessages)
	}
	if n := m.Snapshot(false).AckedMessages; n != 3 {
		t.Errorf("acked %d messages, want the 3 good ones", n)
	}
	if v := rejected(m, code); v != 1 {
		t.Errorf("rejected_messages_total{code=%q} = %v, want 1", code, v)
	}
	if p := d.parked(); p != 1 {
		t.Errorf("%d messages parked, want 1", p)
	}
	if p := m.Snapshot(false).Parked; p != 1 {
		t.Errorf("the parked_messages gauge says %d, want 1", p)
	}
	if c, sent := svc.sentAs(id); sent {
		t.Errorf("the %s (message %d) was sent, as %v", what, id, c)
	}
}

func rejected(m *metrics.Metrics, code string) float64 {
	var out dto.Metric
	if err := m.Rejected.WithLabelValues(code).Write(&out); err != nil {
		return -1
	}
	return out.GetCounter().GetValue()
}

// parked is the Sender's count of messages refused for good.
func (d *Driver) parked() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.loop.s.Stats().Parked
}

// sessionCount is how many sessions the sink has seen.
func (s *sink) sessionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions
}

// sentAs reports whether message id was sent, and with which codec last.
func (s *sink) sentAs(id uint64) (protocol.Codec, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := protocol.CodecUnspecified, false
	for _, f := range s.frames {
		if f.ID == id {
			c, ok = f.Codec, true
		}
	}
	return c, ok
}

// TestUnconvertibleKafkaMessageIsParked: a message spooled as Kafka
// records that does not turn into zstd (a frame claiming more than any
// agent seals, or a section that is not Kafka records) cannot go to a
// sink that did not ask for Kafka records. The session writer refuses it
// locally, as a sink refuses a message for good: it is parked, counted
// (rejected_messages_total{code="local_unconvertible"}), and the messages
// after it are delivered on the same session. Before, the writer closed
// the session, the next one met the same message first, and nothing else
// was ever delivered. The parked message goes at the next session, to a
// sink that asks for Kafka records.
func TestUnconvertibleKafkaMessageIsParked(t *testing.T) {
	bodies := map[string]func(t *testing.T, agent string) []byte{
		"oversize": func(t *testing.T, agent string) []byte {
			var section []byte
			val := bytes.Repeat([]byte{'x'}, 100<<10)
			for i := range 50 {
				section = kafkarec.AppendRecord(section, int32(i), val, kafkarec.RecordHeaders{Agent: []byte(agent), Message: 1, Index: uint32(i), Count: 50})
			}
			if len(section) <= defaults.MaxMessage {
				t.Fatalf("test section of %d bytes fits", len(section))
			}
			body, err := codec.NewEncoder(codec.LevelDefault).Encode(nil, section, codec.KafkaZstd, 0)
			if err != nil {
				t.Fatal(err)
			}
			return body
		},
		"malformed": func(t *testing.T, _ string) []byte {
			body, err := codec.NewEncoder(codec.LevelDefault).Encode(nil, []byte("not a Kafka records section"), codec.KafkaZstd, 0)
			if err != nil {
				t.Fatal(err)
			}
			return body
		},
	}
	for name, bad := range bodies {
		for _, fresh := range []bool{false, true} {
			t.Run(fmt.Sprint(name, "/fresh=", fresh), func(t *testing.T) {
				var release atomic.Bool
				svc := newSink()
				svc.codec = func(session int) protocol.Codec {
					if session >= 2 {
						return protocol.CodecKafkaZstd
					}
					return protocol.CodecUnspecified
				}
				svc.endAfter = func(session int, _ uint64) bool { return session == 1 && release.Load() }
				r := newRig(t, svc, delivery.SenderConfig{ReconnectMin: time.Millisecond, ReconnectMax: 10 * time.Millisecond})
				r.fresh = fresh
				r.spool(t, "good-0")
				badID := r.spoolRecord(t, codec.KafkaZstd, 50, bad(t, r.sp.ID()))
				r.spool(t, "good-2")
				r.spool(t, "good-3")
				// Either the refusal and the later acks, or a second
				// session: what the writer did with the message.
				wantParkedAlone(t, svc, r.m, r.d, refusedUnconvertible, badID, "unconvertible message")
				if w := r.sp.AckedWatermark(); w > badID {
					t.Errorf("watermark %d: the parked message %d must stay spooled", w, badID)
				}
				// The next session's sink asks for Kafka records: the
				// parked message goes to it as it was spooled.
				release.Store(true)
				r.spool(t, "good-4")
				r.waitWatermark(t, 5)
				if c, sent := svc.sentAs(badID); !sent || c != protocol.CodecKafkaZstd {
					t.Errorf("message %d: sent %t as %v, want CodecKafkaZstd on the second session", badID, sent, c)
				}
			})
		}
	}
}

// TestUnreadableSpoolRecordIsParked: a spooled record whose bytes on disk
// changed after the agent started (the start-up check passed them) is
// refused locally like an unconvertible one (code local_unreadable): the
// other messages are delivered on the same session. The spool records the
// failure (Spool.Unreadable, which makes the agent unhealthy), and a
// restart meets the start-up check, which names the segment and byte and
// the repair command.
func TestUnreadableSpoolRecordIsParked(t *testing.T) {
	dir := t.TempDir()
	// An index entry for every record, so the records after the damaged
	// one are read from their own position, not through it.
	opts := []seglog.Option{seglog.WithSync(seglog.SyncNone()), seglog.WithIndexInterval(64)}
	sp, err := spool.Open(dir, 0, "", quiet, opts...)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			sp.Close()
		}
	}()
	var backlog []spool.Spooled
	for i := range 4 {
		backlog = append(backlog, appendPlain(t, sp, fmt.Sprintf("message-%d-%s", i, strings.Repeat("z", 100))))
	}
	damage(t, filepath.Join(dir, "log"), []byte("message-1-"))

	s, err := delivery.NewSender(delivery.SenderConfig{ReconnectMin: time.Millisecond, ReconnectMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	svc := newSink()
	m := metrics.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := Start(ctx, memConfig(svc, sinceStart()), s, sp, m, backlog)
	wantParkedAlone(t, svc, m, d, refusedUnreadable, 1, "unreadable record")
	if err := sp.Unreadable(); !errors.Is(err, seglog.ErrCorrupt) {
		t.Errorf("Spool.Unreadable() = %v, want the corruption", err)
	}
	cancel()
	<-d.Done()
	sp.Close()
	closed = true
	_, err = spool.Open(dir, 0, "", quiet, opts...)
	if err == nil || !strings.Contains(err.Error(), "sluice log check --repair") {
		t.Fatalf("reopening the damaged spool: %v, want the start-up check's repair hint", err)
	}
}

// damage flips a byte of the first record body in the log directory that
// holds marker.
func damage(t *testing.T, logDir string, marker []byte) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(logDir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range segs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(data, marker); i >= 0 {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{data[i+len(marker)] ^ 0xff}, int64(i+len(marker))); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no segment holds %q", marker)
}

// TestCorruptSpoolRecordIsParked: a record the log reads back whole but
// that is no spooled message (spool.Decode refuses it) is refused locally
// (code local_corrupt) and the messages after it are delivered on the same
// session. It does not mark the spool unreadable: the start-up check reads
// the log's records, not the messages in them, so a restart would not
// find it.
func TestCorruptSpoolRecordIsParked(t *testing.T) {
	svc := newSink()
	r := newRig(t, svc, delivery.SenderConfig{ReconnectMin: time.Millisecond, ReconnectMax: 10 * time.Millisecond})
	r.spool(t, "good-0")
	raw := []byte("not a spool record")
	badID, err := r.sp.Log().Append([][]byte{raw})
	if err != nil {
		t.Fatal(err)
	}
	r.d.Spooled([]spool.Spooled{{ID: badID, Size: int64(len(raw)), Records: 1, Raw: len(raw), At: r.now()}})
	r.spool(t, "good-2")
	r.spool(t, "good-3")
	wantParkedAlone(t, svc, r.m, r.d, refusedCorrupt, badID, "corrupt record")
	if err := r.sp.Unreadable(); err != nil {
		t.Errorf("Spool.Unreadable() = %v for a record the log reads whole", err)
	}
}
