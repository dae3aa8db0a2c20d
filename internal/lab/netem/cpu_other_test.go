//go:build !unix

package netem

import "time"

func processCPU() time.Duration { return 0 }
