package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// RSocketGo runs the rsgo-bench peer binary (interop/rsocket-go/cmd/rsgo-bench:
// rsocket-go v0.8.16's client against its own server, in its own process)
// in mode "rr" or "stream" and returns what it printed. api is "block"
// (Block per request) or "async" (SubscribeWith, rsocket-go's own echo
// benchmark path); it matters in mode "rr" only.
func RSocketGo(ctx context.Context, bin, mode, api string, inflight int, dur time.Duration, size int) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, dur+90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-mode", mode, "-api", api, "-inflight", strconv.Itoa(inflight),
		"-duration", dur.String(), "-size", strconv.Itoa(size))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", bin, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var m map[string]float64
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("%s printed %q: %w", bin, out, err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		m["cpu_s"] = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	return m, nil
}

// PeerRR turns rsgo-bench's rr output into an RRResult.
func PeerRR(m map[string]float64) RRResult {
	return RRResult{Requests: int64(m["requests"]), Elapsed: time.Duration(m["elapsed_s"] * 1e9),
		P50: time.Duration(m["p50_us"] * 1e3), P99: time.Duration(m["p99_us"] * 1e3), CPU: time.Duration(m["cpu_s"] * 1e9)}
}
