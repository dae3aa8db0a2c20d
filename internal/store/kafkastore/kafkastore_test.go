package kafkastore

// Tests of the Kafka store that need no broker; the store against a real
// broker is tested through the sink (internal/sink/kafka_test.go), which
// drives it as agents and consumers do.

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/internal/store"
)

func TestParseURL(t *testing.T) {
	u, err := ParseURL("kafka://a:1,b:2/t.x-1?partitions=3&replication=2")
	if err != nil || !slices.Equal(u.brokers, []string{"a:1", "b:2"}) || u.topic != "t.x-1" || u.partitions != 3 || u.replication != 2 {
		t.Errorf("parse: %+v, %v", u, err)
	}
	if u.compression != DefaultCompression {
		t.Errorf("compression %q by default, want %q", u.compression, DefaultCompression)
	}
	if u, err := ParseURL("kafka://a:1/t?compression=lz4"); err != nil || u.compression != "lz4" {
		t.Errorf("compression=lz4: %+v, %v", u, err)
	}
	if u.fourHeaders {
		t.Error("four headers by default")
	}
	if u, err := ParseURL("kafka://a:1/t?headers=four"); err != nil || !u.fourHeaders {
		t.Errorf("headers=four: %+v, %v", u, err)
	}
	for _, s := range []string{"kafka://", "kafka://host:1", "kafka://host/topic", "kafka://host:0/t", "kafka://:9092/t",
		"kafka://h:9092/bad topic", "kafka://h:9092/t?partitions=0", "kafka://h:9092/t?foo=1", "kafka://h:9092/t?compression=gzip", "kafka://h:9092/t?compression=",
		"kafka://h:9092/t?headers=4", "kafka://h:9092/t?headers="} {
		if _, err := ParseURL(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// TestKafkaCheckpoint: the Kafka dedup checkpoint round-trips, partial
// messages included, and a damaged one is refused. No broker needed.
func TestKafkaCheckpoint(t *testing.T) {
	d := store.NewDedup()
	for i := range uint64(50) {
		d.Add("edge-1", i)
		if i%3 != 0 {
			d.Add("edge-2", i*7)
		}
	}
	d.Observe([]byte("edge-3"), 9, 0, 4)
	d.Observe([]byte("edge-3"), 9, 2, 4)
	d.Observe([]byte("edge-1"), 77, 1, 2)
	if !d.Observe([]byte("edge-4"), 5, 0, 1) || !d.Has("edge-4", 5) {
		t.Fatal("a one-record message is not stored once seen")
	}
	if d.Observe([]byte("edge-3"), 9, 2, 4) {
		t.Fatal("a record seen twice is fresh")
	}
	pos := map[int32]int64{0: 1234, 3: 5}
	id := kadm.TopicID{1, 2, 3}
	b := appendKafkaCheckpoint(nil, "metrics", id, pos, d)
	c, err := parseKafkaCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if c.topic != "metrics" || c.id != id || len(c.pos) != 2 || c.pos[0] != 1234 || c.pos[3] != 5 {
		t.Fatalf("parsed %+v", c)
	}
	if c.d.Agents() != d.Agents() {
		t.Fatalf("%d agents, want %d", c.d.Agents(), d.Agents())
	}
	for _, agent := range []string{"edge-1", "edge-2", "edge-3", "edge-4"} {
		for id := range uint64(400) {
			if c.d.Has(agent, id) != d.Has(agent, id) {
				t.Fatalf("agent %s message %d: %v after the round trip, %v before", agent, id, c.d.Has(agent, id), d.Has(agent, id))
			}
		}
	}
	if c.d.PendingMessages() != 2 {
		t.Fatalf("%d pending messages, want 2", c.d.PendingMessages())
	}
	// The rest of message 9 completes it, in the parsed index too.
	for _, x := range []*store.Dedup{d, c.d} {
		x.Observe([]byte("edge-3"), 9, 1, 4)
		if x.Has("edge-3", 9) {
			t.Fatal("complete after 3 of 4 records")
		}
		x.Observe([]byte("edge-3"), 9, 3, 4)
		if !x.Has("edge-3", 9) || x.PendingMessages() != 1 {
			t.Fatal("not complete after 4 of 4 records")
		}
	}
	for n := range len(b) {
		if _, err := parseKafkaCheckpoint(b[:n]); err == nil {
			t.Fatalf("truncated at %d: no error", n)
		}
	}
	if _, err := parseKafkaCheckpoint(append(b, 0)); err == nil {
		t.Fatal("trailing byte: no error")
	}
}

// TestParseHeadersBothForms: a topic holds records of older sinks (four
// headers) and of this one (one HeaderSluice header); both parse to the
// same dedup key, and a record with a malformed sluice header is not
// ours even if it also has the four.
func TestParseHeadersBothForms(t *testing.T) {
	want := RecordHeaders{Agent: []byte("edge-1"), Message: 1<<64 - 1, Index: 299, Count: 1300}
	one := []kgo.RecordHeader{{Key: "x", Value: []byte("y")}, {Key: HeaderSluice, Value: kafkarec.AppendHeaderValue(nil, want)}}
	four := []kgo.RecordHeader{{Key: HeaderAgent, Value: []byte("edge-1")}, {Key: HeaderMessage, Value: []byte("18446744073709551615")},
		{Key: HeaderIndex, Value: []byte("299")}, {Key: HeaderCount, Value: []byte("1300")}}
	for name, hs := range map[string][]kgo.RecordHeader{"one header": one, "four headers": four} {
		h, ok := ParseHeaders(hs)
		if !ok || string(h.Agent) != "edge-1" || h.Message != want.Message || h.Index != want.Index || h.Count != want.Count {
			t.Errorf("%s: %+v %v", name, h, ok)
		}
	}
	bad := append([]kgo.RecordHeader{{Key: HeaderSluice, Value: kafkarec.AppendHeaderValue(nil, want)[:1]}}, four...)
	if h, ok := ParseHeaders(bad); ok {
		t.Errorf("malformed %s header with the four: accepted as %+v", HeaderSluice, h)
	}
}

func TestParseHeaders(t *testing.T) {
	hs := func(kv ...string) []kgo.RecordHeader {
		var out []kgo.RecordHeader
		for i := 0; i < len(kv); i += 2 {
			out = append(out, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return out
	}
	h, ok := ParseHeaders(hs("x", "y", HeaderAgent, "a", HeaderMessage, "18446744073709551615", HeaderIndex, "2", HeaderCount, "3"))
	if !ok || string(h.Agent) != "a" || h.Message != 1<<64-1 || h.Index != 2 || h.Count != 3 {
		t.Fatalf("%+v %v", h, ok)
	}
	for _, bad := range [][]kgo.RecordHeader{
		hs(HeaderAgent, "a", HeaderMessage, "1", HeaderIndex, "0"),
		hs(HeaderAgent, "a", HeaderMessage, "01", HeaderIndex, "0", HeaderCount, "1"),
		hs(HeaderAgent, "a", HeaderMessage, "18446744073709551616", HeaderIndex, "0", HeaderCount, "1"),
		hs(HeaderAgent, "a", HeaderMessage, "1", HeaderIndex, "1", HeaderCount, "1"),
		hs(HeaderAgent, "a", HeaderMessage, "1", HeaderIndex, "0", HeaderCount, "0"),
		hs(HeaderAgent, "", HeaderMessage, "1", HeaderIndex, "0", HeaderCount, "1"),
		hs(HeaderAgent, "a", HeaderMessage, "-1", HeaderIndex, "0", HeaderCount, "1"),
	} {
		if _, ok := ParseHeaders(bad); ok {
			t.Errorf("%v accepted", bad)
		}
	}
}
