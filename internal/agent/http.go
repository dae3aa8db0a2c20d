package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Headers that make ingest retries idempotent (see Agent.IngestFrom).
const (
	HeaderProducer = "Sluice-Producer"
	HeaderSequence = "Sluice-Sequence"
)

// MaxRequestBytes bounds one ingest HTTP request body.
const MaxRequestBytes = 64 << 20

// Handler serves the ingest API:
//
//	POST /v1/records   body: newline-delimited records
//
// 200 once every record is durably spooled; 400 for a body without records
// or that cannot be read; 413 for a
// record over the limit (nothing of that request is spooled) or a body over
// MaxRequestBytes; 507 when the spool quota is reached; 503 while shutting
// down. Empty lines are skipped; a final line without "\n" is a record.
// With the Sluice-Producer and Sluice-Sequence headers a retried request
// is recognised and not spooled twice (the answer says duplicate:true).
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/records", a.serveRecords)
	return mux
}

func (a *Agent) serveRecords(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST with newline-delimited records", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body over %d bytes", MaxRequestBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
		return
	}
	records, err := splitLines(body, a.cfg.MaxRecordBytes)
	if err != nil {
		http.Error(w, err.Error(), statusFor(err))
		return
	}
	if len(records) == 0 {
		http.Error(w, "no records in body: send newline-delimited records", http.StatusBadRequest)
		return
	}
	producer := r.Header.Get(HeaderProducer)
	var seq uint64
	if producer != "" {
		if seq, err = strconv.ParseUint(r.Header.Get(HeaderSequence), 10, 64); err != nil || seq == 0 {
			http.Error(w, HeaderSequence+" must be a positive integer when "+HeaderProducer+" is set", http.StatusBadRequest)
			return
		}
	}
	dup, err := a.IngestFrom(r.Context(), producer, seq, records)
	if err != nil {
		http.Error(w, err.Error(), statusFor(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "{\"records\":%d,\"duplicate\":%t}\n", len(records), dup)
}

// splitLines returns the non-empty lines of body, aliasing it (no copy).
// Lines end at "\n" only: a record is bytes, and a "\r" in it is data.
func splitLines(body []byte, maxRecord int) ([][]byte, error) {
	var out [][]byte
	for line := 1; len(body) > 0; line++ {
		rec := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			rec, body = body[:i:i], body[i+1:]
		} else {
			body = nil
		}
		if len(rec) == 0 {
			continue
		}
		if len(rec) > maxRecord {
			return nil, fmt.Errorf("%w: line %d has %d bytes, limit %d", ErrRecordTooLarge, line, len(rec), maxRecord)
		}
		out = append(out, rec)
	}
	return out, nil
}

func statusFor(err error) int {
	switch {
	case errors.Is(err, ErrRecordTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrSpoolFull), errors.Is(err, ErrNoSpace):
		return http.StatusInsufficientStorage
	case errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}
