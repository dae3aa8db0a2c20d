package client

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Headers of the ingest API that make retries idempotent.
const (
	headerProducer = "Sluice-Producer"
	headerSequence = "Sluice-Sequence"
)

// ErrAgentUnavailable: an HTTPProducer gave up on an agent that was
// unreachable, or refused for lack of room (spool full, restarting), for
// the RetryTimeout.
var ErrAgentUnavailable = errors.New("client: agent unavailable")

// HTTPError is an answer of the ingest API that a retry cannot change.
// It matches ErrRecordTooLarge (413), ErrBadRequest (400) and
// ErrUnauthorized (401) with errors.Is.
type HTTPError struct {
	Status  int
	Message string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("agent answered %d: %s", e.Status, e.Message)
}

// ErrUnauthorized: the agent's ingest API refused the token.
var ErrUnauthorized = errors.New("client: unauthorized")

func (e *HTTPError) Unwrap() error {
	switch e.Status {
	case http.StatusRequestEntityTooLarge:
		return ErrRecordTooLarge
	case http.StatusBadRequest:
		return ErrBadRequest
	case http.StatusUnauthorized:
		return ErrUnauthorized
	}
	return nil
}

type httpCfg struct {
	cfg
	producerID string
	timeout    time.Duration
	gzip       bool
	status     func(RetryStatus)
	client     *http.Client
}

// ProducerID names an HTTPProducer's Produce calls to the agent, which
// spools a retried call once. Default: a random "client-…" id per
// HTTPProducer.
func ProducerID(id string) HTTPOpt {
	return httpOpt{func(h *httpCfg) { h.producerID = id }}
}

// RetryTimeout is how long a call keeps retrying an agent that is
// unreachable, silent or out of room before it fails with
// ErrAgentUnavailable. Default 10 minutes.
func RetryTimeout(d time.Duration) HTTPOpt {
	return httpOpt{func(h *httpCfg) { h.timeout = d }}
}

// Gzip compresses request bodies with gzip: worth it on slow links to the
// agent. Default off.
func Gzip() HTTPOpt {
	return httpOpt{func(h *httpCfg) { h.gzip = true }}
}

// HTTPClient sends the requests with hc (for proxies, custom transports).
// TLS then has no effect: configure hc's transport. Default: a client of
// its own.
func HTTPClient(hc *http.Client) HTTPOpt {
	return httpOpt{func(h *httpCfg) { h.client = hc }}
}

// HeaderSinkDown is the agent's answer header, on a 200, saying that it
// has no session with a sink, and why: the records are spooled and wait
// there.
const HeaderSinkDown = "Sluice-Sink-Down"

// SinkDown is why the agent had no sink connection when it answered the
// last successful call ("" when it had one, or says nothing: an agent
// before issue 24). Records it accepted are durably spooled either way;
// they reach the sink once the agent reconnects.
func (p *HTTPProducer) SinkDown() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sinkDown
}

// OnRetryStatus is called, instead of logging, when calls start failing
// (First), every 2 seconds while they keep failing or a request goes
// unanswered, and when the agent answers again (Failing false), so an
// unreachable agent never looks like a hang.
func OnRetryStatus(fn func(RetryStatus)) HTTPOpt {
	return httpOpt{func(h *httpCfg) { h.status = fn }}
}

// RetryStatus describes a streak of failed requests to the agent.
type RetryStatus struct {
	Agent string // the agent's host:port
	// Failing is false once the agent answers again.
	Failing bool
	// First: the first failure of a streak.
	First bool
	// For is how long the agent has been failing (or, for a Failing
	// status, how long the current request has gone unanswered).
	For time.Duration
	// Cause is the latest failure: "cannot reach it: …", "answered 507 …"
	// or "no answer".
	Cause string
	// GiveUpIn is the time left before the call fails with
	// ErrAgentUnavailable.
	GiveUpIn time.Duration
}

// HTTPProducer sends records to a running agent's ingest API
// (POST /v1/records, newline-delimited), which answers once they are
// fsynced in its spool. Every call carries a producer id and sequence
// number, so the retries it makes while the agent is unreachable or
// restarting are spooled once. Safe for concurrent use; Produce calls are
// serialized (their sequence numbers must reach the agent in order).
type HTTPProducer struct {
	url, addr string
	hc        *http.Client
	cfg       httpCfg

	produceMu sync.Mutex // serializes Produce, which owns seq
	seq       uint64

	// What the status loop reports: since when the agent has been failing
	// (zero: it is not) and why, when the current request started, and
	// when the current call gives up.
	mu                     sync.Mutex
	sinkDown               string // the last 200's HeaderSinkDown
	troubleSince, reqStart time.Time
	cause                  string
	deadline               time.Time
	closed                 bool

	stop chan struct{}
	wg   sync.WaitGroup
}

// requestTimeout bounds one request to a healthy agent: ingest answers
// once the records are fsynced, milliseconds, or at worst seconds under a
// full pipeline.
const requestTimeout = 2 * time.Minute

// statusInterval is how often a failing streak is reported.
const statusInterval = 2 * time.Second

// NewHTTPProducer returns a producer for the agent whose ingest API is at
// agentURL: "http://HOST:PORT", "https://HOST:PORT" or "HOST:PORT" (https
// with TLS, else http); the path defaults to /v1/records.
func NewHTTPProducer(agentURL string, opts ...HTTPOpt) (*HTTPProducer, error) {
	h := httpCfg{timeout: 10 * time.Minute}
	for _, o := range opts {
		o.applyHTTP(&h)
	}
	if h.timeout <= 0 {
		return nil, errors.New("client: RetryTimeout must be positive")
	}
	if h.producerID == "" {
		var id [8]byte
		rand.Read(id[:])
		h.producerID = "client-" + hex.EncodeToString(id[:])
	}
	if len(h.producerID) > 64 {
		return nil, fmt.Errorf("%w: ProducerID over 64 bytes", ErrBadRequest)
	}
	if !strings.Contains(agentURL, "://") {
		scheme := "http://"
		if h.tls != nil {
			scheme = "https://"
		}
		agentURL = scheme + agentURL
	}
	u, err := url.Parse(agentURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: agent URL %q: want http://HOST:PORT or https://HOST:PORT", agentURL)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/records"
	}
	if h.token != "" && u.Scheme != "https" && !h.insecureToken {
		return nil, errors.New("client: a Token without TLS would travel in clear text: use https, or AllowTokenWithoutTLS for loopback tests")
	}
	hc := h.client
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if h.tls != nil {
			tr.TLSClientConfig = h.tls
		}
		hc = &http.Client{Transport: tr}
	}
	p := &HTTPProducer{url: u.String(), addr: u.Host, hc: hc, cfg: h, stop: make(chan struct{})}
	p.wg.Add(1)
	go p.statusLoop()
	return p, nil
}

// ID is the producer id Produce sends.
func (p *HTTPProducer) ID() string { return p.cfg.producerID }

// Produce sends records (non-empty, without "\n") as one request and
// returns once the agent has them fsynced. It retries while the agent is
// unreachable, silent, restarting or out of room, for at most
// RetryTimeout or until ctx ends, always with the same sequence number,
// so the agent spools them once however many attempts reach it.
func (p *HTTPProducer) Produce(ctx context.Context, records ...[]byte) error {
	p.produceMu.Lock()
	defer p.produceMu.Unlock()
	p.seq++
	_, err := p.ProduceIdempotent(ctx, p.cfg.producerID, p.seq, records...)
	return err
}

// ProduceIdempotent sends records under the caller's own producer id and
// sequence number (see Producer.ProduceIdempotent); duplicate reports
// that the agent had already spooled this call. With an empty producerID
// the request carries no sequence, and a retry after a lost answer may
// spool the records twice.
func (p *HTTPProducer) ProduceIdempotent(ctx context.Context, producerID string, seq uint64, records ...[]byte) (duplicate bool, err error) {
	if producerID != "" && seq == 0 {
		return false, fmt.Errorf("%w: sequence numbers start at 1", ErrBadRequest)
	}
	var body bytes.Buffer
	var zw *gzip.Writer
	w := io.Writer(&body)
	if p.cfg.gzip {
		zw = gzip.NewWriter(&body)
		w = zw
	}
	for i, r := range records {
		if len(r) == 0 || bytes.IndexByte(r, '\n') >= 0 {
			return false, fmt.Errorf("%w: record %d is empty or holds a newline, which the ingest API cannot carry", ErrBadRequest, i)
		}
		w.Write(r)
		w.Write([]byte{'\n'})
	}
	if len(records) == 0 {
		return false, nil
	}
	if zw != nil {
		zw.Close()
	}
	return p.post(ctx, producerID, seq, body.Bytes())
}

func (p *HTTPProducer) post(ctx context.Context, producer string, seq uint64, body []byte) (bool, error) {
	backoff := 50 * time.Millisecond
	deadline := time.Now().Add(p.cfg.timeout)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false, ErrClosed
	}
	p.deadline = deadline
	p.mu.Unlock()
	for {
		status, msg, err := p.postOnce(ctx, producer, seq, body, deadline)
		if err == nil && status == http.StatusOK {
			p.recovered()
			return bytes.Contains(msg, []byte(`"duplicate":true`)), nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		// A full spool or a restarting agent clears up by itself;
		// anything else is the input's fault and retrying won't help.
		if err == nil && status != http.StatusInsufficientStorage && status != http.StatusServiceUnavailable {
			return false, &HTTPError{Status: status, Message: string(msg)}
		}
		if err != nil && wrongProtocol(err) {
			// Not an agent's ingest (a gRPC port, TLS against plain
			// text): every retry gets the same answer.
			return false, fmt.Errorf("client: %s does not answer as an agent's ingest does (%s): %w", p.addr, p.url, err)
		}
		cause := fmt.Sprintf("answered %d %s", status, msg)
		if err != nil {
			cause = "cannot reach it: " + err.Error()
		}
		last := p.trouble(cause, deadline)
		if time.Now().After(deadline) {
			return false, fmt.Errorf("%w: agent at %s failing for %s: %s", ErrAgentUnavailable, p.addr, p.cfg.timeout, last)
		}
		t := time.NewTimer(min(backoff, max(time.Until(deadline), time.Millisecond)))
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// postOnce sends one request, bounded by the time left before deadline.
func (p *HTTPProducer) postOnce(ctx context.Context, producer string, seq uint64, body []byte, deadline time.Time) (status int, msg []byte, err error) {
	if d := time.Now().Add(requestTimeout); d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	if p.cfg.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	if producer != "" {
		req.Header.Set(headerProducer, producer)
		req.Header.Set(headerSequence, strconv.FormatUint(seq, 10))
	}
	if p.cfg.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.cfg.token)
	}
	p.mu.Lock()
	p.reqStart = time.Now()
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.reqStart = time.Time{}
		p.mu.Unlock()
	}()
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	msg, _ = io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode == http.StatusOK {
		p.mu.Lock()
		p.sinkDown = resp.Header.Get(HeaderSinkDown)
		p.mu.Unlock()
	}
	return resp.StatusCode, bytes.TrimSpace(msg), nil
}

// statusLoop reports, every statusInterval while the agent fails or a
// request goes unanswered, how long it has been and when the call gives
// up.
func (p *HTTPProducer) statusLoop() {
	defer p.wg.Done()
	t := time.NewTicker(statusInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			p.mu.Lock()
			since, cause, left := p.troubleSince, p.cause, p.deadline.Sub(now).Round(time.Second)
			if since.IsZero() && !p.reqStart.IsZero() && now.Sub(p.reqStart) >= statusInterval {
				since, cause = p.reqStart, "no answer"
			}
			p.mu.Unlock()
			if !since.IsZero() {
				p.report(RetryStatus{Agent: p.addr, Failing: true, For: now.Sub(since), Cause: cause, GiveUpIn: max(left, 0)})
			}
		}
	}
}

func (p *HTTPProducer) report(st RetryStatus) {
	if p.cfg.status != nil {
		p.cfg.status(st)
		return
	}
	if st.Failing {
		p.cfg.log().Warn("client: agent failing; retrying", "agent", st.Agent, "for", st.For.Round(time.Second),
			"cause", st.Cause, "give_up_in", st.GiveUpIn.Round(time.Second))
	} else {
		p.cfg.log().Info("client: agent answers again", "agent", st.Agent, "after", st.For.Round(time.Second))
	}
}

// trouble records a failed attempt; the first of a streak is reported at
// once, the rest by the status loop. It returns the most telling cause: a
// request cut short by the deadline keeps the error seen before it.
func (p *HTTPProducer) trouble(cause string, deadline time.Time) string {
	p.mu.Lock()
	first := p.troubleSince.IsZero()
	if first {
		p.troubleSince = time.Now()
	}
	if p.cause == "" || !strings.Contains(cause, context.DeadlineExceeded.Error()) {
		p.cause = cause
	}
	cause = p.cause
	p.mu.Unlock()
	if first {
		p.report(RetryStatus{Agent: p.addr, Failing: true, First: true, Cause: cause, GiveUpIn: max(time.Until(deadline), 0)})
	}
	return cause
}

func (p *HTTPProducer) recovered() {
	p.mu.Lock()
	since := p.troubleSince
	p.troubleSince, p.cause = time.Time{}, ""
	p.mu.Unlock()
	if !since.IsZero() {
		p.report(RetryStatus{Agent: p.addr, For: time.Since(since)})
	}
}

// Close stops the status reports; calls after it fail with ErrClosed.
// It does not wait for calls in progress.
func (p *HTTPProducer) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	close(p.stop)
	p.wg.Wait()
	return nil
}

// wrongProtocol reports whether err is an answer in another protocol than
// the request's: HTTP/2 or gRPC to HTTP/1.1, plain text to TLS or back.
func wrongProtocol(err error) bool {
	s := err.Error()
	for _, m := range []string{"malformed HTTP response", "server gave HTTP response to HTTPS client", "first record does not look like a TLS handshake"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}
