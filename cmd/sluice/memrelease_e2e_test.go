package main

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/lab/hostile"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// TestSinkReleasesMemoryAfterBurst: a `sluice sink` left idle after a
// burst of clients (streams flooding its gRPC listener) gives the memory
// back to the OS (internal/memrelease): its debug log says so, with less
// held after than before. Before, the runtime kept the pages for minutes
// (docs/reliability.md, "Hostile clients on every listener"); and with
// the watcher's first sample taken at its first tick, a burst begun as
// the sink started was taken for the baseline and nothing was released
// for two minutes (this test found it). The sink exports the runtime's
// memory classes (go_memory_classes_*). The test waits for the release
// with a generous bound; it asserts no duration.
func TestSinkReleasesMemoryAfterBurst(t *testing.T) {
	addr, maddr := freeAddr(t), freeAddr(t)
	p := start(t, "sink", "sink", "--listen", addr, "--data", t.TempDir(), "--metrics", maddr, "--log-level", "debug")
	testwait.For(t, "the sink's metrics", func() bool { return metric(maddr, "go_goroutines") > 0 })
	// The runtime's memory classes, by which scripts/hostile-listeners.sh
	// tells what a daemon keeps after a burst.
	if metric(maddr, "go_memory_classes_heap_objects_bytes") <= 0 {
		t.Error("no go_memory_classes_heap_objects_bytes on /metrics")
	}
	tg, err := hostile.ParseTarget("sink")
	if err != nil {
		t.Fatal(err)
	}
	released := regexp.MustCompile(`returned freed memory to the OS" held_before=(\d+) held_after=(\d+)`)
	before := len(released.FindAllString(p.log.String(), -1))
	rep, err := hostile.Run(context.Background(), hostile.Config{Addr: addr, Source: "127.0.0.2", Target: tg, Mode: hostile.Flood,
		Conns: 20, Duration: 3 * time.Second, MaxRequests: 2000})
	if err != nil || rep.Opened == 0 {
		t.Fatalf("burst: %+v, %v", rep, err)
	}
	var m []string
	testwait.For(t, "a release after the burst", func() bool {
		all := released.FindAllStringSubmatch(p.log.String(), -1)
		if len(all) > before {
			m = all[len(all)-1]
			return true
		}
		return false
	})
	heldBefore, _ := strconv.ParseUint(m[1], 10, 64)
	heldAfter, _ := strconv.ParseUint(m[2], 10, 64)
	t.Logf("burst: %d streams; held %d MiB before the release, %d MiB after", rep.Requests, heldBefore>>20, heldAfter>>20)
	if heldAfter >= heldBefore {
		t.Errorf("held %d bytes before the release, %d after", heldBefore, heldAfter)
	}
}
