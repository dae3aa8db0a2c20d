package sink

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/storedmsg"
	"github.com/sluicehq/sluice/internal/testkit/kafkatest"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
	"github.com/sluicehq/sluice/internal/transport/memconn"
)

// kafkaZstdMessage is message id of agent with recs, sealed as
// sinkclient.KafkaZstdPayload.
func kafkaZstdMessage(t testing.TB, agent string, id uint64, recs ...string) *protocol.Message {
	return &protocol.Message{ID: id, Records: uint32(len(recs)), Codec: protocol.CodecKafkaZstd,
		Payload: sinkclient.KafkaZstdPayload(t, agent, id, recs...)}
}

// memHello opens a Send session over memconn whose Hello lists codecs,
// and returns it with its Welcome.
func memHello(t *testing.T, d *memconn.Dialer, agent string, codecs ...protocol.Codec) (protocol.Conn, *protocol.Welcome) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	c, err := d.Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(&protocol.Hello{AgentID: agent, Version: protocol.Version, Codecs: codecs}); err != nil {
		t.Fatal(err)
	}
	f, err := c.Recv()
	if err != nil {
		t.Fatalf("Welcome: %v", err)
	}
	w, ok := f.(*protocol.Welcome)
	if !ok {
		t.Fatalf("first frame %s, want Welcome", protocol.Name(f))
	}
	return c, w
}

// memOutcomes sends msgs and returns, once each has one, every message's
// outcome: nil for an ack, the Error otherwise.
func memOutcomes(t *testing.T, c protocol.Conn, msgs ...*protocol.Message) map[uint64]*protocol.Error {
	t.Helper()
	for _, m := range msgs {
		if err := c.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	out := map[uint64]*protocol.Error{}
	for len(out) < len(msgs) {
		f, err := c.Recv()
		if err != nil {
			t.Fatalf("with %d of %d outcomes: %v", len(out), len(msgs), err)
		}
		switch f := f.(type) {
		case *protocol.Ack:
			for _, r := range f.Ranges {
				for id := r.First; id <= r.Last; id++ {
					out[id] = nil
				}
			}
		case *protocol.Error:
			out[f.MessageID] = f
		}
	}
	return out
}

// TestKafkaZstdWelcomeEmbedded: the embedded store does not take Kafka
// records sections, so its Welcome asks no codec, whatever the Hello
// lists (the Kafka side of the rule is TestKafkaNative/Welcome).
func TestKafkaZstdWelcomeEmbedded(t *testing.T) {
	h := newHarness(t, nil)
	d := &memconn.Dialer{Service: h.s}
	for _, codecs := range [][]protocol.Codec{
		{protocol.CodecPlain, protocol.CodecZstd, protocol.CodecKafkaZstd},
		{protocol.CodecPlain, protocol.CodecZstd},
	} {
		c, w := memHello(t, d, "edge-1", codecs...)
		if w.Codec != protocol.CodecUnspecified {
			t.Errorf("Hello listing %v: Welcome asks %v, want unspecified (the embedded store keeps batches)", codecs, w.Codec)
		}
		_ = c.CloseSend()
	}
}

// TestKafkaZstdEmbedded: an agent's kafka_zstd messages, to a sink whose
// store is the embedded one, are checked and stored as the zstd batch
// the agent would have sent: the store holds codec.Zstd bodies whose
// records are the agent's, and a Read stream returns them.
func TestKafkaZstdEmbedded(t *testing.T) {
	h := newHarness(t, nil)
	d := &memconn.Dialer{Service: h.s}
	c, _ := memHello(t, d, "edge-1", protocol.CodecZstd, protocol.CodecKafkaZstd)
	want := map[uint64][]string{1: {"a", "bb", "ccc"}, 2: {strings.Repeat("x", 5000)}, 3: {"", "last"}}
	var msgs []*protocol.Message
	for id := uint64(1); id <= 3; id++ {
		msgs = append(msgs, kafkaZstdMessage(t, "edge-1", id, want[id]...))
	}
	// A zstd message between them: both kinds land in one store.
	msgs = append(msgs, &protocol.Message{ID: 4, Records: 1, Codec: protocol.CodecZstd,
		Payload: mustEncode(t, batchOf(t, "zstd"), codec.Zstd)})
	want[4] = []string{"zstd"}
	for id, e := range memOutcomes(t, c, msgs...) {
		if e != nil {
			t.Fatalf("message %d refused: %+v", id, e)
		}
	}
	_ = c.CloseSend()

	it := h.s.Store().NewIterator(0, 1<<20)
	dec := codec.NewDecoder(1 << 20)
	n := 0
	for it.Next() {
		m, err := storedmsg.Decode(it.Value())
		if err != nil {
			t.Fatal(err)
		}
		if m.Codec != codec.Zstd {
			t.Errorf("message %d stored as %v, want zstd", m.MessageID, m.Codec)
		}
		body, err := dec.Decode(nil, m.Body, m.Codec, m.DictID)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		if err := batch.Decode(body, func(r []byte) error { got = append(got, string(r)); return nil }); err != nil {
			t.Fatalf("message %d: %v", m.MessageID, err)
		}
		if !slices.Equal(got, want[m.MessageID]) || int(m.RecordCount) != len(got) {
			t.Errorf("message %d: records %q (count %d), want %q", m.MessageID, got, m.RecordCount, want[m.MessageID])
		}
		n++
	}
	if err := it.Err(); err != nil || n != 4 {
		t.Fatalf("%d messages in the store (%v), want 4", n, err)
	}

	// And through a Read stream.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	r, err := d.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []protocol.Frame{&protocol.ReadStart{Group: "g"}, &protocol.ReadMore{N: 10}} {
		if err := r.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	read := 0
	for {
		f, err := r.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.(*protocol.EndOfLog); ok {
			break
		}
		m := f.(*protocol.Stored)
		var got []string
		for _, rec := range m.Records {
			got = append(got, string(rec))
		}
		if m.AgentID != "edge-1" || !slices.Equal(got, want[m.MessageID]) {
			t.Errorf("read %s/%d: %q, want %q", m.AgentID, m.MessageID, got, want[m.MessageID])
		}
		read++
	}
	if read != 4 {
		t.Fatalf("read %d messages, want 4", read)
	}
}

func batchOf(t testing.TB, recs ...string) []byte {
	t.Helper()
	var b batch.Builder
	for _, r := range recs {
		if err := b.Add([]byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func mustEncode(t testing.TB, body []byte, k codec.Kind) []byte {
	t.Helper()
	out, err := codec.NewEncoder(codec.LevelDefault).Encode(nil, body, k, 0)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKafkaZstdRefused: a kafka_zstd message is refused whole, as
// BAD_PAYLOAD and not retryable, when its records are not exactly those
// of this agent's message: records keyed or headed with another agent's
// id or another message's id (the identity binding), a count that
// disagrees, bytes that do not decompress, no records; the reason is
// counted, the detail says which record and what, and the store holds
// only the good messages.
func TestKafkaZstdRefused(t *testing.T) {
	h := newHarness(t, nil)
	d := &memconn.Dialer{Service: h.s}
	c, _ := memHello(t, d, "edge-1", protocol.CodecKafkaZstd)
	section := func(agent string, id uint64, recs ...string) []byte {
		s, _, err := kafkarec.AppendRecords(nil, batchOf(t, recs...), []byte(agent), id)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Record 1 keyed with another agent's id, its header still this
	// agent's: a splice of two sections.
	mine := section("edge-1", 7, "a", "b")
	other := section("edge-2", 7, "a", "b")
	spliced := slices.Concat(mine[:recordEnd(t, mine, 0)], other[recordEnd(t, other, 0):])
	msg := func(id uint64, records uint32, section []byte) *protocol.Message {
		return &protocol.Message{ID: id, Records: records, Codec: protocol.CodecKafkaZstd, Payload: mustEncode(t, section, codec.KafkaZstd)}
	}
	cases := []struct {
		m      *protocol.Message
		reason string
		detail string
	}{
		{msg(1, 2, section("edge-2", 1, "a", "b")), reasonKafkaRecords, "record 0 of 2"},
		{msg(2, 2, section("edge-1", 99, "a", "b")), reasonKafkaRecords, "record 0 of 2"},
		{msg(7, 2, spliced), reasonKafkaRecords, "record 1 of 2"},
		{msg(3, 3, section("edge-1", 3, "a", "b")), reasonKafkaRecords, "record 0 of 3"},
		{msg(4, 1, section("edge-1", 4, "a", "b")), reasonKafkaRecords, "record 0 of 1"},
		{msg(5, 0, nil), reasonEmpty, "empty batch"},
		{&protocol.Message{ID: 6, Records: 1, Codec: protocol.CodecKafkaZstd, Payload: []byte("not zstd")}, reasonCorrupt, "does not decompress"},
		{msg(8, 2, append(section("edge-1", 8, "a", "b"), 0)), reasonKafkaRecords, "1 bytes after the last of 2 records"},
	}
	var msgs []*protocol.Message
	for _, tc := range cases {
		msgs = append(msgs, tc.m)
	}
	msgs = append(msgs, msg(9, 2, section("edge-1", 9, "ok", "ok")))
	got := memOutcomes(t, c, msgs...)
	counts := map[string]float64{}
	for _, tc := range cases {
		e := got[tc.m.ID]
		switch {
		case e == nil:
			t.Errorf("message %d (%s) was stored", tc.m.ID, tc.detail)
		case e.Code != protocol.CodeBadPayload || e.Retryable || !strings.Contains(e.Detail, tc.detail):
			t.Errorf("message %d: %v retryable=%v %q, want BAD_PAYLOAD, not retryable, %q", tc.m.ID, e.Code, e.Retryable, e.Detail, tc.detail)
		}
		counts[tc.reason]++
	}
	if e := got[9]; e != nil {
		t.Fatalf("the good message refused: %+v", e)
	}
	for reason, want := range counts {
		if n := metricValue(t, h, "sluice_sink_rejected_total{reason="+reason+"}"); n != want {
			t.Errorf("rejected_total{reason=%s} = %v, want %v", reason, n, want)
		}
	}
	_ = c.CloseSend()
	if s := h.stored(); !slices.Equal(s, []string{"edge-1/9"}) {
		t.Fatalf("store holds %v, want edge-1/9 only", s)
	}
}

// recordEnd is where record i of a records section ends.
func recordEnd(t *testing.T, section []byte, i int) int {
	t.Helper()
	off := 0
	for j := 0; ; j++ {
		n, w := binary.Varint(section[off:])
		if w <= 0 {
			t.Fatal("bad varint in a test section")
		}
		off += w + int(n)
		if j == i {
			return off
		}
	}
}

// TestKafkaNative: the Kafka-native hop through a sink, against a broker.
// The Welcome asks for kafka_zstd exactly when the store takes it (its
// own batches: zstd, one header, agent-records=on) and the Hello listed
// it; kafka_zstd messages, mixed with zstd ones, land in the topic as the
// records franz-go's path writes for them, whether the store took them
// (agent-records=on; these messages are below minAgentBatchBytes, so
// their records join the store's own batches) or the session converted
// them (the default, and lz4 through franz-go's producer).
func TestKafkaNative(t *testing.T) {
	b := kafkatest.Start(t)
	t.Run("Welcome", func(t *testing.T) {
		for _, tc := range []struct {
			query  string
			codecs []protocol.Codec
			want   protocol.Codec
		}{
			{"?agent-records=on", []protocol.Codec{protocol.CodecZstd, protocol.CodecKafkaZstd}, protocol.CodecKafkaZstd},
			{"?agent-records=on", []protocol.Codec{protocol.CodecPlain, protocol.CodecZstd}, protocol.CodecUnspecified},
			{"?agent-records=on", nil, protocol.CodecUnspecified},
			{"", []protocol.Codec{protocol.CodecZstd, protocol.CodecKafkaZstd}, protocol.CodecUnspecified},
			{"?compression=lz4", []protocol.Codec{protocol.CodecZstd, protocol.CodecKafkaZstd}, protocol.CodecUnspecified},
			{"?headers=four", []protocol.Codec{protocol.CodecZstd, protocol.CodecKafkaZstd}, protocol.CodecUnspecified},
		} {
			h := kafkaHarness(t, b, newTopic(t)+tc.query, nil)
			c, w := memHello(t, &memconn.Dialer{Service: h.s}, "edge-1", tc.codecs...)
			if w.Codec != tc.want {
				t.Errorf("store %q, Hello listing %v: Welcome asks %v, want %v", tc.query, tc.codecs, w.Codec, tc.want)
			}
			_ = c.CloseSend()
			h.stop()
		}
	})
	for name, query := range map[string]string{"agent-records": "?agent-records=on", "zstd": "?compression=zstd", "lz4": "?compression=lz4"} {
		t.Run("Deliver-"+name, func(t *testing.T) {
			topic := newTopic(t)
			h := kafkaHarness(t, b, topic+query, nil)
			c, _ := memHello(t, &memconn.Dialer{Service: h.s}, "edge-1", protocol.CodecZstd, protocol.CodecKafkaZstd)
			want := map[uint64][]string{}
			var msgs []*protocol.Message
			for id := uint64(1); id <= 12; id++ {
				recs := sinkclient.Records(id, 1+int(id)%5)
				want[id] = recs
				if id%3 == 0 {
					msgs = append(msgs, &protocol.Message{ID: id, Records: uint32(len(recs)), Codec: protocol.CodecZstd,
						Payload: mustEncode(t, batchOf(t, recs...), codec.Zstd)})
					continue
				}
				msgs = append(msgs, kafkaZstdMessage(t, "edge-1", id, recs...))
			}
			for id, e := range memOutcomes(t, c, msgs...) {
				if e != nil {
					t.Fatalf("message %d refused: %+v", id, e)
				}
			}
			_ = c.CloseSend()
			recs := checkTopic(t, b.Addr, topic, "edge-1", want)
			// One agent, one partition: its records in message order.
			for i := 1; i < len(recs); i++ {
				p, r := recs[i-1], recs[i]
				if r.message < p.message || r.message == p.message && r.index != p.index+1 {
					t.Fatalf("record %s after %s", r.id(), p.id())
				}
			}
		})
	}
}
