//go:build !linux

package netem

import "time"

// fineTimer is only needed on Linux; elsewhere time.Timer is used throughout.
type fineTimer struct{}

func (*fineTimer) sleep(time.Duration) bool { return false }
func (*fineTimer) close()                   {}
