package diskstore

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/internal/xfer"
)

// BenchmarkIdlePartialHeap reports the heap an idle partial upload keeps
// (issue 23: a tus client resetting in a loop leaves one a round, kept
// until --expire for its client to resume): each op begins an upload as
// tus does (BeginKept), writes 512 KiB of it and Releases it; the heap
// after a GC, divided by the uploads, is bytes/partial.
//
//	go test -run XXX -bench IdlePartialHeap -benchtime 3000x ./internal/xfer/diskstore/
func BenchmarkIdlePartialHeap(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	p := make([]byte, 512<<10)
	crc := xfer.CRC32C(p)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; b.Loop(); i++ {
		u, err := s.BeginKept(fmt.Sprintf("u%07d", i), 1<<20, nil, "filename ZmlsZQ==", true)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := u.Write(0, p, crc); err != nil {
			b.Fatal(err)
		}
		u.Release()
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "bytes/partial")
	b.ReportMetric(float64(int64(after.HeapObjects)-int64(before.HeapObjects))/float64(b.N), "objects/partial")
}
