package export

import (
	"net/http"
	"strconv"
	"time"
)

// outcome is what an answer of the receiver means for the request.
type outcome int

const (
	// accepted: the receiver has it; go on.
	accepted outcome = iota
	// retry: the receiver could not take it now (5xx, 429, 408, no
	// answer): send the same request again after a back-off.
	retry
	// poison: the receiver refuses this request as it is (another 4xx);
	// sending it again cannot help, so it is counted and skipped.
	poison
)

// classify maps an HTTP status to an outcome. Prometheus' remote-write
// and OTLP/HTTP agree: 2xx accepted, 429 and 5xx retried, other 4xx
// dropped. 408 is a timeout on the way, not a verdict on the request.
// Anything else (a 3xx the client did not follow, 1xx) is retried: it
// says nothing about the request.
func classify(status int) outcome {
	switch {
	case status >= 200 && status < 300:
		return accepted
	case status == http.StatusTooManyRequests || status == http.StatusRequestTimeout:
		return retry
	case status >= 400 && status < 500:
		return poison
	}
	return retry
}

// The back-off between attempts at one request: doubling from
// backoffMin up to backoffMax. A receiver's Retry-After is honoured up
// to maxRetryAfter, so a receiver that asks for an hour (or a garbled
// date far ahead) cannot stall the exporter for longer than that.
const (
	backoffMin    = 100 * time.Millisecond
	backoffMax    = 30 * time.Second
	maxRetryAfter = 5 * time.Minute
)

// backoff is the pause before the attempt after failed attempts
// (1, 2, …); retryAfter (0: none) is what the receiver asked for.
func backoff(failed int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, maxRetryAfter)
	}
	d := backoffMin
	for i := 1; i < failed && d < backoffMax; i++ {
		d *= 2
	}
	return min(d, backoffMax)
}

// parseRetryAfter reads a Retry-After header (RFC 9110 10.2.3: seconds,
// or an HTTP date, taken relative to now); 0 when absent or unreadable.
func parseRetryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.ParseInt(h, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		if s > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
