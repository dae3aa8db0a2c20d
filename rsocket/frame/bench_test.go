package frame

import "testing"

// loop runs f like b.Loop and also reports the CPU time per op
// ("cpu-ns/op", see cpuNanos).
func loop(b *testing.B, f func()) {
	b.ReportAllocs()
	n := 0
	start := cpuNanos()
	for b.Loop() {
		f()
		n++
	}
	if d := cpuNanos() - start; d > 0 && n > 0 {
		b.ReportMetric(float64(d)/float64(n), "cpu-ns/op")
	}
}

// Benchmarks per golden frame: encode into a reused buffer, and parse with
// the type's Parse function (through Validate, which dispatches on the type).
// Report: go test -run XXX -bench . -benchmem ./rsocket/frame/
func BenchmarkEncode(b *testing.B) {
	for _, g := range goldens() {
		b.Run(g.name, func(b *testing.B) {
			buf := make([]byte, 0, 256)
			loop(b, func() {
				if _, err := g.encode(buf[:0]); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, g := range goldens() {
		b.Run(g.name, func(b *testing.B) {
			fr := unhex(b, g.hex)
			loop(b, func() {
				if _, err := Validate(fr); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkPayloadHotPath is the steady-state data path: one PAYLOAD with
// 16 bytes of metadata and 1 KiB of data, encoded with a length prefix and
// parsed back.
func BenchmarkPayloadHotPath(b *testing.B) {
	md, data := make([]byte, 16), make([]byte, 1024)
	buf := make([]byte, 0, 2048)
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(Size(TypePayload, md, data)))
		loop(b, func() {
			out := ReserveLengthPrefix(buf[:0])
			out, _ = AppendPayload(out, 1, FlagNext, md, data)
			_ = SetLengthPrefix(out, 0)
		})
	})
	fr, _ := AppendPayload(nil, 1, FlagNext, md, data)
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(fr)))
		loop(b, func() {
			p, err := ParsePayload(fr)
			if err != nil || len(p.Data) != 1024 {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkPayload64 is the request-response hot path of `sluice bench
// rsocket`: a 64 B PAYLOAD (N|C, no metadata) with its length prefix,
// encoded into a reused buffer and parsed back. The goal is ≥ 50 M
// frames/s per core each way (≤ 20 ns/op) with 0 allocations.
func BenchmarkPayload64(b *testing.B) {
	data := make([]byte, 64)
	buf := make([]byte, 0, 128)
	b.Run("encode", func(b *testing.B) {
		loop(b, func() {
			out := ReserveLengthPrefix(buf[:0])
			out, _ = AppendPayload(out, 1, FlagNext|FlagComplete, nil, data)
			_ = SetLengthPrefix(out, 0)
		})
	})
	fr, _ := AppendPayload(nil, 1, FlagNext|FlagComplete, nil, data)
	b.Run("decode", func(b *testing.B) {
		loop(b, func() {
			p, err := ParsePayload(fr)
			if err != nil || len(p.Data) != 64 {
				b.Fatal(err)
			}
		})
	})
}
