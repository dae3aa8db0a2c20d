package seglog

import (
	"fmt"
	"testing"
	"time"
)

var benchSizes = []int{100, 16 << 10, 256 << 10}

var benchPolicies = []struct {
	name string
	p    SyncPolicy
}{
	{"always", SyncAlways()},
	{"interval10ms", SyncInterval(10 * time.Millisecond)},
	{"none", SyncNone()},
}

func sizeName(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchmarkAppend appends one record per op from one goroutine: the cost of
// a lone writer, including one fdatasync per op under "always".
func BenchmarkAppend(b *testing.B) {
	for _, size := range benchSizes {
		for _, pol := range benchPolicies {
			b.Run(sizeName(size)+"/"+pol.name, func(b *testing.B) {
				l := openT(b, b.TempDir(), WithSync(pol.p))
				defer l.Close()
				recs := [][]byte{make([]byte, size)}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := l.Append(recs); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				st := l.Stats()
				b.ReportMetric(float64(st.Syncs)/b.Elapsed().Seconds(), "fsyncs/s")
			})
		}
	}
}

// BenchmarkAppendGroupCommit appends from 16 goroutines per CPU, so
// concurrent appends share writes and fdatasyncs.
func BenchmarkAppendGroupCommit(b *testing.B) {
	for _, size := range benchSizes {
		for _, pol := range benchPolicies {
			b.Run(sizeName(size)+"/"+pol.name, func(b *testing.B) {
				l := openT(b, b.TempDir(), WithSync(pol.p))
				defer l.Close()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.SetParallelism(16)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					recs := [][]byte{make([]byte, size)}
					for pb.Next() {
						if _, err := l.Append(recs); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				st := l.Stats()
				b.ReportMetric(float64(st.Records)/float64(max(st.Writes, 1)), "records/write")
			})
		}
	}
}

// BenchmarkRead reads sequentially through a log of 16 KiB records.
func BenchmarkRead(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			l := openT(b, b.TempDir(), WithSync(SyncNone()))
			defer l.Close()
			n := (64 << 20) / size
			rec := [][]byte{make([]byte, size)}
			for i := 0; i < n; i++ {
				appendT(b, l, rec...)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			it := l.NewIterator(0, 1<<20)
			for i := 0; i < b.N; i++ {
				if !it.Next() {
					if it.Err() != nil {
						b.Fatal(it.Err())
					}
					it.Seek(0)
					if !it.Next() {
						b.Fatal("empty")
					}
				}
			}
		})
	}
}
