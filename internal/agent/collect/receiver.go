package collect

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/agent/ingest"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/defaults"
)

// Config is what the receivers need of the agent.
type Config struct {
	// Ingest spools records and returns once they are durable (the
	// agent's Ingest). Required.
	Ingest func(ctx context.Context, records [][]byte) error
	// MaxRecordBytes bounds one spooled record; larger requests are split
	// (see splitRecords).
	MaxRecordBytes int
	// Tokens, when set, are required as on /v1/records.
	Tokens *auth.Tokens
	// BodyIdleTimeout ends a request whose body sends nothing this long
	// (default defaults.IngestBodyIdleTimeout).
	BodyIdleTimeout time.Duration
	Logger          *slog.Logger
	// Registry, when set, gets the receivers' metrics.
	Registry prometheus.Registerer
	// StallTimeout ends a body that holds defaults.StallBytes and brings
	// less than that more in this time (default defaults.StallTimeout;
	// stallbody.go).
	StallTimeout time.Duration
	// stallClock, if set, is the stall rule's clock (tests): the time
	// once a body's reads have brought it fed bytes.
	stallClock func(fed int64) time.Time
}

// Receiver serves remote-write and OTLP into the spool. Create it with
// New; mount it with Register and serve gRPC with ServeGRPC.
type Receiver struct {
	cfg      Config
	log      *slog.Logger
	requests *prometheus.CounterVec
	records  *prometheus.CounterVec
}

// New makes a Receiver and registers its metrics.
func New(cfg Config) *Receiver {
	if cfg.BodyIdleTimeout <= 0 {
		cfg.BodyIdleTimeout = defaults.IngestBodyIdleTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	rc := &Receiver{cfg: cfg, log: cfg.Logger,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "agent",
			Name: "collect_requests_total", Help: "Requests from collectors (remote-write, OTLP), by endpoint and answer (HTTP status or gRPC code)."},
			[]string{"endpoint", "code"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "agent",
			Name: "collect_records_total", Help: "Records spooled from collectors' requests, by kind (a request over --max-record is several)."},
			[]string{"kind"}),
	}
	if cfg.Registry != nil {
		cfg.Registry.MustRegister(rc.requests, rc.records)
	}
	return rc
}

// Register mounts the HTTP endpoints on mux: POST /api/v1/write and
// POST /v1/metrics, /v1/logs, /v1/traces.
func (rc *Receiver) Register(mux *http.ServeMux) {
	mux.HandleFunc("/api/v1/write", rc.serveRemoteWrite)
	for _, s := range signals {
		mux.HandleFunc(s.path, func(w http.ResponseWriter, r *http.Request) { rc.serveOTLP(s, w, r) })
	}
}

// authorized answers 401 or 405 through fail, in the endpoint's error
// format, and returns false for a request that may not go on.
func (rc *Receiver) authorized(w http.ResponseWriter, r *http.Request, fail func(status int, err error)) bool {
	if rc.cfg.Tokens != nil {
		if err := ingest.CheckBearer(rc.cfg.Tokens, r.Header.Values("Authorization")); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice ingest"`)
			fail(http.StatusUnauthorized, err)
			return false
		}
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(http.StatusMethodNotAllowed, errors.New("use POST"))
		return false
	}
	return true
}

// spoolErrStatus maps an Ingest error to an HTTP status: 413 for a
// record the agent can never take; for the rest, which a later retry may
// get through, full (the spool's quota; OTLP calls that 429) or else 503,
// both retried by the collectors. 500 is not used: an OTLP sender must
// not retry it.
func spoolErrStatus(err error, full int) int {
	switch {
	case errors.Is(err, ingest.ErrRecordTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, spool.ErrFull):
		return full
	}
	return http.StatusServiceUnavailable
}

// retryAfterSeconds is the Retry-After of a 429 or 503: the spool makes
// room as the sink acknowledges, which takes at least a round trip.
const retryAfterSeconds = 5

func setRetryAfter(w http.ResponseWriter, status int) {
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
}

// spool stores records and counts them.
func (rc *Receiver) spool(ctx context.Context, kindName string, records [][]byte) error {
	if len(records) == 0 {
		return nil
	}
	if err := rc.cfg.Ingest(ctx, records); err != nil {
		return err
	}
	rc.records.WithLabelValues(kindName).Add(float64(len(records)))
	return nil
}

// count counts one request to endpoint answered code (an HTTP status,
// or a gRPC code's name).
func (rc *Receiver) count(endpoint, code string) {
	rc.requests.WithLabelValues(endpoint, code).Inc()
}
