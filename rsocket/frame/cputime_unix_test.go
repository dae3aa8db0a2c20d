//go:build unix

package frame

import "syscall"

// cpuNanos is the CPU time (user + system) this process has used. On a
// shared, oversubscribed machine wall-clock ns/op mostly measures the wait
// for a core; CPU time per op is what the code costs.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
