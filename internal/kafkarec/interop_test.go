package kafkarec_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/internal/store/kafkastore"
)

// compressors are the two ways the agent could compress a records
// section, both zstd frames every Kafka consumer reads: the settings of
// the Kafka store's batchCompressor (fastest level, 64 KiB window, no
// frame checksum: franz-go's own window), and the agent's codec.Encoder at
// its default level (1 MiB window, single-segment frame with the content
// size and a checksum), which is what the agent sends today.
func compressors(t *testing.T) map[string]func([]byte) []byte {
	sinkLike, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
		zstd.WithWindowSize(64<<10), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
	if err != nil {
		t.Fatal(err)
	}
	agent := codec.NewEncoder(codec.LevelDefault)
	return map[string]func([]byte) []byte{
		"batchCompressor settings": func(b []byte) []byte { return sinkLike.EncodeAll(b, nil) },
		"agent codec default level": func(b []byte) []byte {
			out, err := agent.Encode(nil, b, codec.Zstd, 0)
			if err != nil {
				t.Fatal(err)
			}
			return out
		},
	}
}

// TestFranzGoReadsBatch is the interop proof of the Kafka-native hop: a
// record batch made of AppendRecords' section, compressed as the agent
// would, behind AppendBatch's header, is read by franz-go's own consumer
// code as the records the sink produces today: kmsg.RecordBatch parses
// the header (CRC-32C checked here by hand), kgo.ProcessFetchPartition
// (which checks the CRC again and decompresses) gives every record's key,
// value, sluice header, offset and timestamp, and kafkastore.ParseHeaders
// reads the dedup key from the header.
func TestFranzGoReadsBatch(t *testing.T) {
	var bb batch.Builder
	var values [][]byte
	for i := range 1000 {
		v := fmt.Appendf(nil, "cpu,host=h%d usage=%d.5 %d", i%7, i, 1_700_000_000+i)
		if i%100 == 0 {
			v = nil // empty records are records too
		}
		values = append(values, v)
		if err := bb.Add(v); err != nil {
			t.Fatal(err)
		}
	}
	agent := []byte("edge-7")
	const message = 1<<40 + 3
	section, n, err := kafkarec.AppendRecords(nil, bb.Bytes(), agent, message)
	if err != nil || n != len(values) {
		t.Fatalf("%d records, %v", n, err)
	}
	ts := time.UnixMilli(1_764_000_000_123)
	for name, compress := range compressors(t) {
		t.Run(name, func(t *testing.T) {
			b, err := kafkarec.AppendBatch(nil, kafkarec.BatchHeader{Records: n, Timestamp: ts.UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, compress(section))
			if err != nil {
				t.Fatal(err)
			}
			// The broker assigns the base offset (outside the CRC).
			const base = 5000
			binary.BigEndian.PutUint64(b, base)
			checkHeader(t, b, n, ts)
			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "t", Partition: 3},
				&kmsg.FetchResponseTopicPartition{Partition: 3, HighWatermark: base + int64(n), RecordBatches: b}, kgo.DefaultDecompressor(), nil)
			if fp.Err != nil || len(fp.Records) != n {
				t.Fatalf("franz-go: %d records, %v", len(fp.Records), fp.Err)
			}
			for i, r := range fp.Records {
				want := kafkarec.AppendHeaderValue(nil, kafkarec.RecordHeaders{Agent: agent, Message: message, Index: uint32(i), Count: uint32(n)})
				if r.Offset != base+int64(i) || !r.Timestamp.Equal(ts) || r.Topic != "t" || r.Partition != 3 ||
					!bytes.Equal(r.Key, agent) || !bytes.Equal(r.Value, values[i]) ||
					len(r.Headers) != 1 || r.Headers[0].Key != kafkarec.HeaderSluice || !bytes.Equal(r.Headers[0].Value, want) {
					t.Fatalf("record %d: offset %d, time %v, key %q, value %q, headers %v", i, r.Offset, r.Timestamp, r.Key, r.Value, r.Headers)
				}
				h, ok := kafkastore.ParseHeaders(r.Headers)
				if !ok || !bytes.Equal(h.Agent, agent) || h.Message != message || int(h.Index) != i || int(h.Count) != n {
					t.Fatalf("record %d: kafkastore.ParseHeaders: %+v, %v", i, h, ok)
				}
			}
			// A flipped bit of the compressed bytes fails the CRC.
			b[len(b)-1] ^= 1
			if fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "t"},
				&kmsg.FetchResponseTopicPartition{RecordBatches: b}, kgo.DefaultDecompressor(), nil); fp.Err == nil {
				t.Fatal("franz-go accepted a batch with a flipped bit")
			}
		})
	}
}

// checkHeader parses b's header with kmsg and checks its fields and CRC.
func checkHeader(t *testing.T, b []byte, n int, ts time.Time) {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if int(rb.Length) != len(b)-12 || rb.Magic != 2 || rb.Attributes != 4 || int(rb.LastOffsetDelta) != n-1 || int(rb.NumRecords) != n ||
		rb.FirstTimestamp != ts.UnixMilli() || rb.MaxTimestamp != ts.UnixMilli() || rb.ProducerID != -1 || rb.ProducerEpoch != -1 || rb.FirstSequence != -1 || rb.PartitionLeaderEpoch != -1 {
		t.Fatalf("header: %+v", rb)
	}
	if crc := crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(rb.CRC) != crc {
		t.Fatalf("crc %08x, computed %08x", uint32(rb.CRC), crc)
	}
}
