package spool

import (
	"bytes"
	"testing"

	"github.com/sluicehq/sluice/internal/codec"
)

func TestSpooledRecordFormat(t *testing.T) {
	m := Record{Kind: codec.ZstdDict, DictID: 7, Records: 3, Marks: []Mark{{Producer: "p1", Seq: 9, Done: 4}, {Producer: "producer-two", Seq: 1 << 40, Done: 7, Complete: true}}, Body: []byte("body")}
	b := Append(nil, m)
	got, err := Decode(b)
	if err != nil || got.Kind != m.Kind || got.DictID != 7 || got.Records != 3 || string(got.Body) != "body" ||
		len(got.Marks) != 2 || got.Marks[1] != m.Marks[1] {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range [][]byte{nil, b[:5], append([]byte{9}, b[1:]...), append([]byte{1, 9}, b[2:]...),
		Append(nil, Record{Kind: codec.Zstd, DictID: 3})} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("accepted %x", bad)
		}
	}
}

// TestSpooledKafkaZstdKind: a message sealed as a Kafka records section
// (codec.KafkaZstd) is spooled in the same record format and reads back
// with its kind; it has no dictionary.
func TestSpooledKafkaZstdKind(t *testing.T) {
	m := Record{Kind: codec.KafkaZstd, Records: 2, Marks: []Mark{{Producer: "p", Seq: 1, Done: 2, Complete: true}}, Body: []byte("section")}
	b := Append(nil, m)
	got, err := Decode(b)
	if err != nil || got.Kind != codec.KafkaZstd || got.DictID != 0 || got.Records != 2 || string(got.Body) != "section" || len(got.Marks) != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := Decode(Append(nil, Record{Kind: codec.KafkaZstd, DictID: 3})); err == nil {
		t.Error("accepted a KafkaZstd record with a dictionary id")
	}
	if _, err := Decode(Append(nil, Record{Kind: codec.KafkaZstd + 1})); err == nil {
		t.Error("accepted an unknown kind")
	}
}

func FuzzDecodeSpooled(f *testing.F) {
	f.Add(Append(nil, Record{Kind: codec.KafkaZstd, Records: 1, Body: []byte("x")}))
	f.Add(Append(nil, Record{Kind: codec.Zstd, Records: 1, Body: []byte("x")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err == nil && !bytes.Equal(Append(nil, m), b) {
			t.Fatal("re-encoding differs")
		}
	})
}

// FuzzDecodeState: a damaged delivery-state file is an error, never a
// panic, and what decodes re-encodes to the same state.
func FuzzDecodeState(f *testing.F) {
	f.Add(encodeState(7, map[string]Progress{"produce-1": {Seq: 3, Done: 10, Complete: true}}))
	f.Add(encodeState(0, nil))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		w, p, err := decodeState(b)
		if err != nil {
			return
		}
		w2, p2, err := decodeState(encodeState(w, p))
		if err != nil || w2 != w || len(p2) != len(p) {
			t.Fatalf("state does not round-trip: %v", err)
		}
		for k, v := range p {
			if p2[k] != v {
				t.Fatalf("producer %q: %+v != %+v", k, p2[k], v)
			}
		}
	})
}
