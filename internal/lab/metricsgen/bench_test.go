package metricsgen

import "testing"

// chunk is the number of bytes one benchmark operation produces (to within
// a line, carried over to the next operation), so that b.SetBytes gives
// MB/s of sample lines.
const chunk = 64 << 10

func BenchmarkAppendRecord(b *testing.B) {
	g, err := New(Config{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 1024)
	for range 10_000 { // warm up
		buf = g.AppendRecord(buf[:0])
	}
	b.SetBytes(chunk)
	b.ReportAllocs()
	var n, want int64
	for b.Loop() {
		want += chunk
		for n < want {
			buf = g.AppendRecord(buf[:0])
			n += int64(len(buf))
		}
	}
	b.ReportMetric(float64(g.Stats().Bytes)/float64(g.Stats().Samples), "B/line")
}

func BenchmarkNextMessage(b *testing.B) {
	g, err := New(Config{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	var msg [][]byte
	for range 100 { // warm up: fill every partition's buffers
		msg = g.NextMessage(msg)
	}
	b.SetBytes(chunk)
	b.ReportAllocs()
	var n, want int64
	for b.Loop() {
		want += chunk
		for n < want {
			msg = g.NextMessage(msg)
			for _, r := range msg {
				n += int64(len(r))
			}
		}
	}
}

func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(Config{Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
