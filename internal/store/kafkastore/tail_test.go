package kafkastore

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// recordBatch is an encoded record batch (magic 2) of producer pid holding
// n records from offset base; control marks a transaction marker batch.
func recordBatch(base int64, n int32, pid int64, control bool) []byte {
	rb := kmsg.RecordBatch{FirstOffset: base, Magic: 2, LastOffsetDelta: n - 1, ProducerID: pid, NumRecords: n,
		Records: bytes.Repeat([]byte{0}, int(n))}
	if control {
		rb.Attributes = 0x20
	}
	b := rb.AppendTo(nil)
	rb.Length = int32(len(b) - 12)
	return rb.AppendTo(nil)
}

// TestSplitOwn: the batches of the sink's producer are cut out of a fetch,
// each as one segment to skip with the offset after it and its record
// count; the batches between, another producer's or a transaction marker of
// ours, stay together to be decoded, and so does a trailing batch Kafka cut
// short. With no producer id known (-1), nothing is skipped.
func TestSplitOwn(t *testing.T) {
	other1 := recordBatch(0, 3, 9, false)
	mine1 := recordBatch(3, 4, 7, false)
	mine2 := recordBatch(7, 2, 7, false)
	marker := recordBatch(9, 1, 7, true)
	other2 := recordBatch(10, 5, 9, false)
	cut := recordBatch(15, 2, 7, false)[:40]
	var in []byte
	for _, b := range [][]byte{other1, mine1, mine2, marker, other2, cut} {
		in = append(in, b...)
	}
	segs := splitOwn(in, 7)
	want := []segment{
		{data: other1},
		{next: 7, records: 4},
		{next: 9, records: 2},
		{data: append(append(append([]byte{}, marker...), other2...), cut...)},
	}
	if len(segs) != len(want) {
		t.Fatalf("%d segments, want %d: %+v", len(segs), len(want), segs)
	}
	for i, s := range segs {
		w := want[i]
		if !bytes.Equal(s.data, w.data) || s.next != w.next || s.records != w.records {
			t.Fatalf("segment %d: %d bytes, next %d, %d records; want %d bytes, next %d, %d records",
				i, len(s.data), s.next, s.records, len(w.data), w.next, w.records)
		}
	}
	if segs := splitOwn(in, -1); len(segs) != 1 || !bytes.Equal(segs[0].data, in) {
		t.Fatalf("no producer id: %d segments", len(segs))
	}
	if segs := splitOwn(nil, 7); len(segs) != 0 {
		t.Fatalf("nothing fetched: %d segments", len(segs))
	}
}

// FuzzSplitOwn: a fetch's bytes come from the brokers, and a batch header
// from whoever wrote it. splitOwn never panics, and what it keeps to decode
// is the input less whole batches of the producer, in order: the data
// segments are consecutive pieces of the input, and only complete
// batches fall between them.
func FuzzSplitOwn(f *testing.F) {
	f.Add(append(recordBatch(0, 3, 9, false), recordBatch(3, 2, 7, false)...), int64(7))
	f.Add(recordBatch(5, 1, 7, true), int64(7))
	f.Add(recordBatch(0, 2, 7, false)[:62], int64(7))
	f.Fuzz(func(t *testing.T, in []byte, own int64) {
		at := 0
		for _, s := range splitOwn(in, own) {
			if s.data == nil {
				continue
			}
			i := bytes.Index(in[at:], s.data)
			if len(s.data) == 0 || i < 0 {
				t.Fatalf("a data segment of %d bytes is not a piece of the input after byte %d", len(s.data), at)
			}
			at += i + len(s.data)
		}
		if own < 0 {
			if segs := splitOwn(in, own); len(in) > 0 && (len(segs) != 1 || !bytes.Equal(segs[0].data, in)) {
				t.Fatalf("no producer id, yet %d segments", len(segs))
			}
		}
	})
}
