package bench

import (
	"runtime"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// FrameRates measures sluice's frame codec on one goroutine: encoding a
// PAYLOAD of size bytes (with its length prefix) into a reused buffer, and
// parsing it back. It returns frames per second of CPU time (the process's
// user + system time, which on a shared machine measures the code rather
// than the wait for a core) and allocations per frame for each.
func FrameRates(dur time.Duration, size int) (encPerSec, encAllocs, decPerSec, decAllocs float64) {
	data := make([]byte, size)
	buf := make([]byte, 0, size+64)
	fr, _ := frame.AppendPayload(nil, 1, frame.FlagNext|frame.FlagComplete, nil, data)
	run := func(f func()) (float64, float64) {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		n := 0
		start, cpu0 := time.Now(), selfCPU()
		for time.Since(start) < dur {
			for range 4096 {
				f()
			}
			n += 4096
		}
		cpu := selfCPU() - cpu0
		runtime.ReadMemStats(&b)
		return float64(n) / cpu.Seconds(), float64(b.Mallocs-a.Mallocs) / float64(n)
	}
	var sink int
	encPerSec, encAllocs = run(func() {
		out := frame.ReserveLengthPrefix(buf[:0])
		out, _ = frame.AppendPayload(out, 1, frame.FlagNext|frame.FlagComplete, nil, data)
		_ = frame.SetLengthPrefix(out, 0)
		sink += len(out)
	})
	decPerSec, decAllocs = run(func() {
		p, _ := frame.ParsePayload(fr)
		sink += len(p.Data)
	})
	_ = sink
	return
}
