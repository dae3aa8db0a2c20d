package ingest

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/idleread"
)

// Headers that make ingest retries idempotent (see Agent.IngestFrom).
const (
	HeaderProducer = "Sluice-Producer"
	HeaderSequence = "Sluice-Sequence"
	// HeaderSinkDown, on a 200, says why the agent has no session with a
	// sink: the records are spooled and wait for one.
	HeaderSinkDown = "Sluice-Sink-Down"
)

// MaxRequestBytes bounds one ingest HTTP request body.
const MaxRequestBytes = 64 << 20

// Handler serves the ingest API:
//
//	POST /v1/records   body: newline-delimited records
//
// 200 once every record is durably spooled; 400 for a body without records
// or that cannot be read or decoded; 401 without a valid bearer token when
// Config.IngestTokens is set; 413 for a record over the limit (nothing of
// that request is spooled), a body over MaxRequestBytes before or after
// decoding, or a request over half the spool quota; 415 for a Content-Encoding other than identity, gzip or zstd;
// 507 when the spool quota is reached or its disk is full; 503 while
// shutting down. Empty lines are skipped; a final line without "\n" is a
// record. With the Sluice-Producer and Sluice-Sequence headers a retried
// request is recognised and not spooled twice (the answer says
// duplicate:true).
func (g *Ingester) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/records", g.serveRecords)
	return mux
}

func (g *Ingester) serveRecords(w http.ResponseWriter, r *http.Request) {
	if g.cfg.Tokens != nil {
		if err := CheckBearer(g.cfg.Tokens, r.Header.Values("Authorization")); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice ingest"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST with newline-delimited records", http.StatusMethodNotAllowed)
		return
	}
	buf := bodyPool.Get().(*bodyBuf)
	// The records alias buf; IngestFrom has copied them into a message
	// (or refused them) when it returns, so buf is free again then.
	defer buf.release()
	status, err := readBody(w, r, &buf.b, g.cfg.BodyIdleTimeout)
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	records, err := splitLines(buf.recs[:0], buf.b.Bytes(), g.cfg.MaxRecordBytes)
	buf.recs = records
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
	dup, err := g.IngestFrom(r.Context(), producer, seq, records)
	if err != nil {
		http.Error(w, err.Error(), statusFor(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if g.cfg.SinkDown != nil {
		if err := g.cfg.SinkDown(); err != nil {
			w.Header().Set(HeaderSinkDown, strings.ReplaceAll(err.Error(), "\n", " "))
		}
	}
	fmt.Fprintf(w, "{\"records\":%d,\"duplicate\":%t}\n", len(records), dup)
}

// CheckBearer accepts exactly one "Authorization: Bearer TOKEN" header
// naming a token of tokens.
func CheckBearer(tokens *auth.Tokens, values []string) error {
	if len(values) != 1 {
		return errors.New("send one \"Authorization: Bearer TOKEN\" header")
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" {
		return errors.New("malformed Authorization header: want \"Bearer TOKEN\"")
	}
	if _, ok := tokens.Lookup(strings.TrimSpace(token)); !ok {
		return errors.New("unknown token")
	}
	return nil
}

// readBody reads the request body and undoes its Content-Encoding, with
// MaxRequestBytes bounding both the bytes received and the bytes decoded
// (a small compressed body can expand to gigabytes), and idle bounding
// the body's silences. On error it returns the status to answer.
func readBody(w http.ResponseWriter, r *http.Request, body *bytes.Buffer, idle time.Duration) (int, error) {
	in := io.Reader(http.MaxBytesReader(w, idleread.New(w, r, idle), MaxRequestBytes))
	enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
	switch enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(in)
		if err != nil {
			return ReadStatus(err), fmt.Errorf("gzip body: %w", err)
		}
		defer zr.Close()
		in = zr
	case "zstd":
		zr := zstdPool.Get().(*zstd.Decoder)
		if err := zr.Reset(in); err != nil {
			return ReadStatus(err), fmt.Errorf("zstd body: %w", err)
		}
		// Reset(nil) drops the reference to this request's body.
		defer func() { zr.Reset(nil); zstdPool.Put(zr) }()
		in = zr
	default:
		return http.StatusUnsupportedMediaType, fmt.Errorf("Content-Encoding %q not supported: send identity, gzip or zstd", enc)
	}
	if n := r.ContentLength; enc == "" || enc == "identity" {
		if n > 0 && n <= maxPooledBody {
			// One read into a buffer of the right size: ReadFrom wants
			// MinRead bytes of room before it sees the end, so without
			// the extra it would double the buffer (and copy it) at the
			// very end. Only up to maxPooledBody: a declared length costs
			// the client nothing (40 connections each declaring 64 MiB
			// and sending 3 bytes held 2.5 GB before:
			// scripts/stalled-senders.sh ingest); a larger body grows
			// the buffer as its bytes arrive.
			body.Grow(int(n) + bytes.MinRead)
		}
	}
	if _, err := body.ReadFrom(io.LimitReader(in, MaxRequestBytes+1)); err != nil {
		return ReadStatus(err), fmt.Errorf("reading body: %w", err)
	}
	if body.Len() > MaxRequestBytes {
		return http.StatusRequestEntityTooLarge, fmt.Errorf("request body decodes to over %d bytes", MaxRequestBytes)
	}
	return 0, nil
}

// bodyBuf is a request body and its records, reused across requests.
type bodyBuf struct {
	b    bytes.Buffer
	recs [][]byte
}

// maxPooledBody: larger bodies are left to the garbage collector, so one
// huge request does not pin its memory in the pool.
const maxPooledBody = 4 << 20

var bodyPool = sync.Pool{New: func() any { return new(bodyBuf) }}

func (b *bodyBuf) release() {
	if b.b.Cap() > maxPooledBody {
		return
	}
	b.b.Reset()
	clear(b.recs)
	b.recs = b.recs[:0]
	bodyPool.Put(b)
}

// ReadStatus is the answer to a request whose body could not be read:
// 413 when it went over its limit (http.MaxBytesReader), 408 when it
// went silent (idleread), else 400. The collectors' endpoints answer the
// same.
func ReadStatus(err error) int {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, idleread.ErrIdle):
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

// zstdPool holds stream decoders: each owns sizeable buffers. The window
// is bounded so a hostile frame cannot make one allocate more than the
// largest body.
var zstdPool = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(MaxRequestBytes),
		zstd.WithDecoderMaxMemory(MaxRequestBytes))
	if err != nil {
		panic(err) // only for invalid options, which are constant
	}
	return d
}}

// splitLines appends to out the non-empty lines of body, aliasing it (no
// copy). Lines end at "\n" only: a record is bytes, and a "\r" in it is
// data.
func splitLines(out [][]byte, body []byte, maxRecord int) ([][]byte, error) {
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
			return out[:0], fmt.Errorf("%w: line %d has %d bytes, limit %d", ErrRecordTooLarge, line, len(rec), maxRecord)
		}
		out = append(out, rec)
	}
	return out, nil
}

func statusFor(err error) int {
	switch {
	case errors.Is(err, ErrRecordTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, spool.ErrFull), errors.Is(err, spool.ErrNoSpace):
		return http.StatusInsufficientStorage
	case errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}
