//go:build !unix

package frame

func cpuNanos() int64 { return 0 }
