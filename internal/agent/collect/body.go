package collect

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/klauspost/compress/snappy"

	"github.com/sluicehq/sluice/internal/agent/ingest"
	"github.com/sluicehq/sluice/internal/idleread"
)

// maxBody bounds a request body both as received and decoded, as on
// /v1/records: a small compressed body can expand to gigabytes.
const maxBody = ingest.MaxRequestBytes

// readRaw reads the request body as sent, bounded by maxBody, with the
// body's silences and trickles bounded by lim. On error it returns the
// status to answer: 413 over the bound, 503 for a silent or stalled
// body (with Retry-After from the handler: a stalled body is a link's
// trouble, and the senders retry only 5xx and 429 — Prometheus' remote
// client and the OTLP exporters both drop a request answered 408), 400
// otherwise.
func readRaw(w http.ResponseWriter, r *http.Request, lim bodyLimits) ([]byte, int, error) {
	var b bytes.Buffer
	stall := newStallBody(idleread.New(w, r, lim.idle), lim, func() int64 { return int64(b.Cap()) })
	in := http.MaxBytesReader(w, stall, maxBody)
	if n := r.ContentLength; n > 0 && n <= maxBody {
		// Only what a declared length promises, up to the bound: it
		// costs a client nothing to declare.
		b.Grow(int(min(n, 4<<20)) + bytes.MinRead)
	}
	if _, err := b.ReadFrom(in); errors.Is(err, errStalled) {
		return nil, http.StatusServiceUnavailable, err
	} else if err != nil {
		status := ingest.ReadStatus(err)
		if status == http.StatusRequestTimeout {
			status = http.StatusServiceUnavailable // retried, as above
		}
		return nil, status, fmt.Errorf("reading body: %w", err)
	}
	return b.Bytes(), 0, nil
}

// readGzip reads an OTLP/HTTP body: identity or gzip (the encodings the
// OTLP spec names), the decoded bytes bounded by maxBody too.
func readGzip(w http.ResponseWriter, r *http.Request, lim bodyLimits) ([]byte, int, error) {
	enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
	if enc != "" && enc != "identity" && enc != "gzip" {
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("Content-Encoding %q not supported: send identity or gzip", enc)
	}
	raw, status, err := readRaw(w, r, lim)
	if err != nil || enc != "gzip" {
		return raw, status, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("gzip body: %w", err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(zr, maxBody+1)); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("gzip body: %w", err)
	}
	if b.Len() > maxBody {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("gzip body decodes to over %d bytes", maxBody)
	}
	return b.Bytes(), 0, nil
}

// readSnappy reads a remote-write body: snappy's block format, which
// remote-write 1.0 always uses (Content-Encoding: snappy, or none from
// senders that leave it out). The length the block declares is checked
// against maxBody before anything is allocated for it.
func readSnappy(w http.ResponseWriter, r *http.Request, lim bodyLimits) ([]byte, int, error) {
	enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
	if enc != "" && enc != "snappy" {
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("Content-Encoding %q not supported: remote-write bodies are snappy", enc)
	}
	raw, status, err := readRaw(w, r, lim)
	if err != nil {
		return nil, status, err
	}
	return decodeSnappy(raw)
}

// decodeSnappy undoes snappy's block format, refusing a block that
// declares more than maxBody decoded bytes.
func decodeSnappy(raw []byte) ([]byte, int, error) {
	n, err := snappy.DecodedLen(raw)
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("%w: snappy: %v", errMalformed, err)
	}
	if n > maxBody {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("snappy body declares %d decoded bytes, limit %d", n, maxBody)
	}
	body, err := snappy.Decode(nil, raw)
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("%w: snappy: %v", errMalformed, err)
	}
	return body, 0, nil
}
