package kafkastore

import (
	"maps"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/store"
)

// FuzzParseHeaders: a record's headers come from whoever writes to the
// topic. Any values parse to sluice headers or to "not ours", never a
// panic; what parses is canonical (the decimal values print back to the
// same bytes) and consistent (a non-empty agent, index below count).
func FuzzParseHeaders(f *testing.F) {
	f.Add([]byte("edge-1"), []byte("42"), []byte("0"), []byte("1"))
	f.Add([]byte("a"), []byte("18446744073709551615"), []byte("2"), []byte("3"))
	f.Add([]byte(""), []byte("01"), []byte("-1"), []byte("0"))
	f.Fuzz(func(t *testing.T, agent, msg, idx, count []byte) {
		h, ok := ParseHeaders([]kgo.RecordHeader{
			{Key: "other", Value: msg},
			{Key: HeaderAgent, Value: agent}, {Key: HeaderMessage, Value: msg},
			{Key: HeaderIndex, Value: idx}, {Key: HeaderCount, Value: count},
		})
		if !ok {
			return
		}
		if len(h.Agent) == 0 || len(h.Agent) > store.MaxAgentID || h.Index >= h.Count {
			t.Fatalf("accepted inconsistent headers %+v", h)
		}
		if strconv.FormatUint(h.Message, 10) != string(msg) || strconv.FormatUint(uint64(h.Index), 10) != string(idx) ||
			strconv.FormatUint(uint64(h.Count), 10) != string(count) {
			t.Fatalf("accepted a non-canonical number: %q %q %q → %+v", msg, idx, count, h)
		}
	})
}

// FuzzKafkaCheckpoint: the Kafka store's dedup checkpoint is a file the
// sink owns; damaged, it parses to an error (the sink then reads the
// whole topic), never a panic. One that parses encodes back to one that
// parses the same.
func FuzzKafkaCheckpoint(f *testing.F) {
	d := store.NewDedup()
	for i := range uint64(20) {
		d.Add("edge-1", i)
	}
	d.Observe([]byte("edge-3"), 9, 0, 4)
	f.Add(appendKafkaCheckpoint(nil, "metrics", kadm.TopicID{1, 2, 3}, map[int32]int64{0: 1234, 3: 5}, d))
	f.Add(appendKafkaCheckpoint(nil, "", kadm.TopicID{}, nil, store.NewDedup()))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseKafkaCheckpoint(b)
		if err != nil {
			return
		}
		again, err := parseKafkaCheckpoint(appendKafkaCheckpoint(nil, c.topic, c.id, c.pos, c.d))
		if err != nil {
			t.Fatalf("a parsed checkpoint does not parse after encoding: %v", err)
		}
		if again.topic != c.topic || again.id != c.id || !maps.Equal(again.pos, c.pos) ||
			again.d.Agents() != c.d.Agents() || again.d.PendingMessages() != c.d.PendingMessages() {
			t.Fatalf("round trip changed the checkpoint")
		}
	})
}
