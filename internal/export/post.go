package export

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/klauspost/compress/snappy"

	"github.com/sluicehq/sluice/internal/telemetry"
)

// maxAnswerBytes is how much of a receiver's answer is read (so that the
// connection can be reused) and errAnswerBytes how much of it an error
// quotes.
const (
	maxAnswerBytes = 64 << 10
	errAnswerBytes = 256
)

// poster sends one request to a receiver, in its protocol.
type poster struct {
	target Target
	client *http.Client
	// buf is the reused snappy buffer of remote-write requests.
	buf []byte
}

// result is one attempt's outcome: the bytes sent, and for a failure
// why (err) and the Retry-After the receiver asked for.
type result struct {
	outcome    outcome
	sent       int
	err        error
	retryAfter time.Duration
	// rejected is what an OTLP receiver that took the request said it
	// rejected of it (partial success): how many items, and why.
	rejected    int64
	rejectedWhy string
}

// post sends payload, a marked record's body of kind, once.
func (p *poster) post(ctx context.Context, kind telemetry.Kind, payload []byte) result {
	body := payload
	if p.target.Protocol == RemoteWrite {
		p.buf = snappy.Encode(p.buf[:cap(p.buf)], payload)
		body = p.buf
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.target.endpoint(kind), bytes.NewReader(body))
	if err != nil {
		return result{outcome: poison, err: err}
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "sluice-sink")
	if p.target.Protocol == RemoteWrite {
		req.Header.Set("Content-Encoding", "snappy")
		req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return result{outcome: retry, err: err}
	}
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	resp.Body.Close()
	res := result{outcome: classify(resp.StatusCode), sent: len(body)}
	if res.outcome == accepted && p.target.Protocol == OTLP && resp.Header.Get("Content-Type") == "application/x-protobuf" {
		// An answer that cannot be read does not undo the 2xx: the
		// receiver has the request.
		res.rejected, res.rejectedWhy, _ = partialSuccess(answer)
	}
	if res.outcome != accepted {
		quote := answer[:min(len(answer), errAnswerBytes)]
		res.err = fmt.Errorf("%s: %s: %q", req.URL.Redacted(), resp.Status, bytes.TrimSpace(quote))
		res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return res
}
