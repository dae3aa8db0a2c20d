// Command rssfloor measures what the Go runtime itself keeps resident
// after a burst of memory has been freed: a process with nothing but a
// small live set allocates a burst the way a server under a hostile
// client does (goroutines with stacks and buffers, small and mid-sized
// objects), lets it all go, forces two GCs and returns the free pages as
// internal/memrelease does (debug.FreeOSMemory), and prints its anonymous
// RSS before, at the peak and after, from /proc/self/smaps_rollup, as
// scripts/hostile-listeners.sh reads a daemon's.
//
// It is the floor under the "RSS back within 10 % of the start" rows of
// docs/reliability.md ("Hostile clients on every listener"): what no
// daemon written in Go gets below, whatever it frees.
//
//	go run ./internal/lab/rssfloor [-burst 80MiB] [-goroutines 2000] [-reps 3]
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
)

// anonKiB is the process's Anonymous memory in KiB (smaps_rollup), or
// VmRSS where smaps_rollup is missing.
func anonKiB() int {
	for _, f := range []struct{ path, key string }{{"/proc/self/smaps_rollup", "Anonymous:"}, {"/proc/self/status", "VmRSS:"}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(l, f.key); ok {
				n, _ := strconv.Atoi(strings.Fields(rest)[0])
				return n
			}
		}
	}
	return 0
}

func release() {
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(200 * time.Millisecond)
}

var keep [][]byte

// burst allocates about n bytes across g goroutines that each hold a
// 32 KiB buffer and a spread of small and mid-sized objects until told
// to go, then frees it all.
func burst(n, g int) (peak int) {
	per := n / g
	var ready, done sync.WaitGroup
	stop := make(chan struct{})
	for range g {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			var mine [][]byte
			mine = append(mine, touched(32<<10))
			for left, i := per-32<<10, 0; left > 0; i++ {
				sz := 64 << (i % 8) // 64 B .. 8 KiB
				mine = append(mine, touched(sz))
				left -= sz
			}
			ready.Done()
			<-stop
			runtime.KeepAlive(mine)
		}()
	}
	ready.Wait()
	peak = anonKiB()
	close(stop)
	done.Wait()
	return peak
}

// touched returns n bytes written to, so their pages are resident (a
// server's buffers hold what it read).
func touched(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func main() {
	burstFlag := flag.String("burst", "80MiB", "bytes allocated in the burst (KiB, MiB)")
	goroutines := flag.Int("goroutines", 2000, "goroutines the burst is spread over")
	reps := flag.Int("reps", 3, "bursts, one after another")
	flag.Parse()
	n, err := parseSize(*burstFlag)
	if err != nil || *goroutines < 1 || *reps < 1 {
		fmt.Fprintln(os.Stderr, "rssfloor: bad flags:", err)
		os.Exit(2)
	}
	// A small live set, as a daemon that has served has.
	for range 1000 {
		keep = append(keep, touched(4096))
	}
	release()
	start := anonKiB()
	fmt.Printf("anonymous RSS at the start: %.1f MB (live set 4 MB)\n", float64(start)/1024)
	for r := 1; r <= *reps; r++ {
		peak := burst(n, *goroutines)
		release()
		after := anonKiB()
		fmt.Printf("burst %d: %s over %d goroutines: peak %.1f MB, after %.1f MB: %.1f MB kept (%.1f%% of the burst's growth), after/start %.2f\n",
			r, *burstFlag, *goroutines, float64(peak)/1024, float64(after)/1024, float64(after-start)/1024,
			100*float64(after-start)/float64(max(peak-start, 1)), float64(after)/float64(start))
	}
}

func parseSize(s string) (int, error) {
	for _, u := range []struct {
		suffix string
		mul    int
	}{{"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.Atoi(v)
			return n * u.mul, err
		}
	}
	return strconv.Atoi(s)
}
