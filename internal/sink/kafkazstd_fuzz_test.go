package sink

import (
	"bytes"
	"testing"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/kafkarec"
)

// FuzzKafkaRecordsConvert: the records section of a kafka_zstd message
// comes from an agent, which the sink does not trust. For any bytes,
// message id and count, kafkaRecords accepts or refuses without panicking;
// what it accepts holds exactly count records of this agent's message,
// and the zstd batch a converter makes of it (for a store that does not
// take records sections) decodes to the same values, which rebuild the
// section byte for byte.
func FuzzKafkaRecordsConvert(f *testing.F) {
	const agent = "edge-1"
	for _, seed := range []struct {
		recs []string
		msg  uint64
	}{
		{[]string{"a"}, 5},
		{[]string{"cpu,host=a usage=1", "", "mem free=2"}, 1<<64 - 1},
	} {
		var bb batch.Builder
		for _, r := range seed.recs {
			_ = bb.Add([]byte(r))
		}
		s, n, _ := kafkarec.AppendRecords(nil, bb.Bytes(), []byte(agent), seed.msg)
		f.Add(s, seed.msg, uint32(n))
		f.Add(s[:len(s)-1], seed.msg, uint32(n))
		f.Add(s, seed.msg+1, uint32(n))
		other, _, _ := kafkarec.AppendRecords(nil, bb.Bytes(), []byte("edge-2"), seed.msg)
		f.Add(other, seed.msg, uint32(n))
	}
	conv := &kafkaConverter{enc: codec.NewEncoder(codec.LevelFastest)}
	dec := codec.NewDecoder(1 << 24)
	f.Fuzz(func(t *testing.T, section []byte, message uint64, count uint32) {
		conv.b.Reset()
		longest, err := kafkaRecords(section, []byte(agent), message, count, &conv.b)
		if err != nil {
			return
		}
		if conv.b.Count() != int(count) {
			t.Fatalf("accepted %d records, count says %d", conv.b.Count(), count)
		}
		z, err := conv.seal()
		if err != nil {
			t.Fatal(err)
		}
		body, err := dec.Decode(nil, z, codec.Zstd, 0)
		if err != nil {
			t.Fatalf("the converted message does not decompress: %v", err)
		}
		n, maxLen := 0, 0
		if err := batch.Decode(body, func(r []byte) error { n++; maxLen = max(maxLen, len(r)); return nil }); err != nil || n != int(count) {
			t.Fatalf("the converted batch: %d records, %v; want %d", n, err, count)
		}
		if maxLen != longest {
			t.Fatalf("longest record %d, kafkaRecords said %d", maxLen, longest)
		}
		again, _, err := kafkarec.AppendRecords(nil, body, []byte(agent), message)
		if count > 0 && (err != nil || !bytes.Equal(again, section)) {
			t.Fatalf("the converted records rebuild as %x, not the section %x (%v)", again, section, err)
		}
	})
}
