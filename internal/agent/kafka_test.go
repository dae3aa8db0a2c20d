package agent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// kafkaSink is a scripted sink whose first session's Welcome asks for
// Kafka records sections (CodecKafkaZstd) when the Hello offers them, and
// whose later sessions do not (a failover to a sink that does not). It
// checks every message as a sink would: a KafkaZstd one must decompress
// within the agent's MaxMessageBytes to a section kafkarec.Records
// accepts for the agent's id, the message's id and its record count.
type kafkaSink struct {
	svc        *fakeService
	maxMessage int
	// endFirst, once set, makes session 1 end at its next message
	// (unacknowledged, so it is sent again in session 2).
	endFirst bool

	mu      sync.Mutex
	dec     *codec.Decoder
	codecs  map[uint64]protocol.Codec // per message id, the codec of its first copy
	byCodec map[protocol.Codec][]string
	stored  map[string]int
	bad     []string
}

func newKafkaSink(maxMessage int) *kafkaSink {
	k := &kafkaSink{svc: newFakeService(), maxMessage: maxMessage, dec: codec.NewDecoder(maxMessage),
		codecs: map[uint64]protocol.Codec{}, byCodec: map[protocol.Codec][]string{}, stored: map[string]int{}}
	k.svc.hello = func(session int, h *protocol.Hello) (protocol.Frame, error) {
		w := bigWelcome()
		if session == 1 && slices.Contains(h.Codecs, protocol.CodecKafkaZstd) {
			w.Codec = protocol.CodecKafkaZstd
		}
		return w, nil
	}
	k.svc.message = func(session int, m *protocol.Message, copies int) (protocol.Frame, error) {
		k.mu.Lock()
		defer k.mu.Unlock()
		if session == 1 && k.endFirst {
			return nil, protocol.Errorf(protocol.StatusUnavailable, "sink going away")
		}
		if _, seen := k.codecs[m.ID]; seen {
			return &protocol.Ack{Ranges: []protocol.IDRange{{First: m.ID, Last: m.ID}}}, nil
		}
		k.codecs[m.ID] = m.Codec
		body, err := k.dec.Decode(nil, m.Payload, codec.Kind(m.Codec), m.DictID)
		if err != nil {
			k.bad = append(k.bad, fmt.Sprintf("message %d (%v): %v", m.ID, m.Codec, err))
			return nil, protocol.Errorf(protocol.StatusInvalid, "message %d: %v", m.ID, err)
		}
		keep := func(_ int, v []byte) error {
			k.stored[string(v)]++
			k.byCodec[m.Codec] = append(k.byCodec[m.Codec], string(v))
			return nil
		}
		if m.Codec == protocol.CodecKafkaZstd {
			err = kafkarec.Records(body, []byte(k.svc.hellos[0].AgentID), m.ID, int(m.Records), keep)
		} else {
			n := 0
			err = batch.Decode(body, func(v []byte) error { n++; return keep(0, v) })
			if err == nil && n != int(m.Records) {
				err = fmt.Errorf("%d records, the message says %d", n, m.Records)
			}
		}
		if err != nil {
			k.bad = append(k.bad, fmt.Sprintf("message %d (%v): %v", m.ID, m.Codec, err))
			return nil, protocol.Errorf(protocol.StatusInvalid, "message %d: %v", m.ID, err)
		}
		return &protocol.Ack{Ranges: []protocol.IDRange{{First: m.ID, Last: m.ID}}}, nil
	}
	return k
}

// TestAgentSealsKafkaRecordsWhenAsked: the real agent against a sink whose
// Welcome asks for CodecKafkaZstd sends its new messages as Kafka records
// sections, each accepted by kafkarec.Records for (agent id, message id,
// count) and within MaxMessageBytes; when the session fails over to a
// sink whose Welcome does not ask, new messages are zstd again, and the
// message spooled as Kafka records before the failover reaches that sink
// as the zstd batch of its records (a sink that did not ask may not know
// the codec). Every record arrives once.
func TestAgentSealsKafkaRecordsWhenAsked(t *testing.T) {
	const maxMessage = 16 << 10
	k := newKafkaSink(maxMessage)
	a, _ := newMemAgent(t, k.svc, func(c *Config) { c.Compression, c.MaxMessageBytes = codec.Zstd, maxMessage })
	testwait.For(t, "the first session", func() bool { return a.driver.Ready() == nil })

	want := map[string]int{}
	ingest := func(tag string, n int) {
		for i := 0; i < n; i += 100 {
			var recs [][]byte
			for j := i; j < min(i+100, n); j++ {
				r := fmt.Sprintf("%s-%d %s", tag, j, "cpu_seconds_total{host=\"h\",core=\"3\"} 12.5")
				want[r]++
				recs = append(recs, []byte(r))
			}
			if err := a.Ingest(context.Background(), recs); err != nil {
				t.Fatal(err)
			}
		}
	}
	ingest("kafka", 2000)
	waitAcked(t, a)

	// Session 1 ends at its next message; session 2 does not ask.
	k.mu.Lock()
	k.endFirst = true
	k.mu.Unlock()
	ingest("switch", 1)
	testwait.For(t, "the second session", func() bool {
		sessions, _, _ := k.svc.snapshot()
		return sessions >= 2 && a.driver.Ready() == nil
	})
	ingest("zstd", 2000)
	waitAcked(t, a)

	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.bad) > 0 {
		t.Fatalf("the sink refused messages: %v", k.bad)
	}
	if len(k.stored) != len(want) {
		t.Fatalf("sink holds %d distinct records, want %d", len(k.stored), len(want))
	}
	for r, n := range want {
		if k.stored[r] != n {
			t.Fatalf("record %q stored %d times, want %d", r, k.stored[r], n)
		}
	}
	for _, v := range k.byCodec[protocol.CodecKafkaZstd] {
		if v[:5] == "zstd-" {
			t.Fatalf("record %q, ingested after the failover, came in a KafkaZstd message", v)
		}
	}
	for _, v := range k.byCodec[protocol.CodecKafkaZstd] {
		if v[:7] == "switch-" {
			t.Fatalf("record %q, sealed as Kafka records but sent after the failover, came as kafka_zstd to the sink that did not ask", v)
		}
	}
	for _, v := range k.byCodec[protocol.CodecZstd] {
		if v[:6] == "kafka-" {
			t.Fatalf("record %q, ingested and delivered while the sink asked for Kafka records, came as zstd", v)
		}
	}
	if n := len(k.byCodec[protocol.CodecKafkaZstd]); n != 2000 {
		t.Errorf("%d records came in KafkaZstd messages, want the 2000 delivered while the first sink asked", n)
	}
	if n := len(k.byCodec[protocol.CodecZstd]); n != 2001 {
		t.Errorf("%d records came as zstd, want the 2000 ingested after the failover and the one sent after it", n)
	}
}

// The driver dials before the ingester exists, so a sink's Welcome asking
// for Kafka records may come first: the ask is kept and given to the
// ingester once it is made (Agent.setSealKafka), and the gauge says so.
// Before it was kept, the first session's ask was lost until the next
// Welcome.
func TestWelcomeBeforeIngesterKeepsTheAsk(t *testing.T) {
	const maxMessage = 16 << 10
	k := newKafkaSink(maxMessage)
	a, reg := newMemAgent(t, k.svc, func(c *Config) {
		c.Compression, c.MaxMessageBytes = codec.Zstd, maxMessage
		c.beforeIngester = func(a *Agent) {
			testwait.For(t, "a session before the ingester exists", func() bool { return a.driver.Ready() == nil })
		}
	})
	if !a.ingest.SealsKafka() {
		t.Fatal("the ingester does not seal Kafka records: the Welcome that came before it was lost")
	}
	if v, ok := value(t, reg, "sluice_agent_seal_kafka_records", nil); !ok || v != 1 {
		t.Fatalf("sluice_agent_seal_kafka_records %v (present %v), want 1", v, ok)
	}
}
