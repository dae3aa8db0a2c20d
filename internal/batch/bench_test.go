package batch_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/batch"
)

// Benchmarks use batches of 64 KiB-ish: 100-byte records, about the size of
// a log line, 600 to a batch.
const benchRecords, benchRecordLen = 600, 100

func BenchmarkBuilderAdd(b *testing.B) {
	rec := bytes.Repeat([]byte{'r'}, benchRecordLen)
	var bld batch.Builder
	bld.Grow(benchRecords * (benchRecordLen + 1))
	b.ReportAllocs()
	b.SetBytes(benchRecordLen)
	for i := 0; b.Loop(); i++ {
		if i%benchRecords == 0 {
			bld.Reset()
		}
		if err := bld.Add(rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuilderBatch builds a whole batch per op, Bytes included.
func BenchmarkBuilderBatch(b *testing.B) {
	rec := bytes.Repeat([]byte{'r'}, benchRecordLen)
	var bld batch.Builder
	b.ReportAllocs()
	b.SetBytes(benchRecords * benchRecordLen)
	for b.Loop() {
		bld.Reset()
		for range benchRecords {
			_ = bld.Add(rec)
		}
		_ = bld.Bytes()
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, size := range []int{1, benchRecordLen, 4096} {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			rec := bytes.Repeat([]byte{'r'}, size)
			var bld batch.Builder
			for range benchRecords {
				_ = bld.Add(rec)
			}
			body := bld.Bytes()
			total := 0
			fn := func(rec []byte) error { total += len(rec); return nil }
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if err := batch.Decode(body, fn); err != nil {
					b.Fatal(err)
				}
			}
			if total == 0 {
				b.Fatal("no records")
			}
		})
	}
}

func BenchmarkCount(b *testing.B) {
	rec := bytes.Repeat([]byte{'r'}, benchRecordLen)
	var bld batch.Builder
	for range benchRecords {
		_ = bld.Add(rec)
	}
	body := bld.Bytes()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := batch.Count(body); err != nil {
			b.Fatal(err)
		}
	}
}
