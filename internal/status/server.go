package status

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/extension"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// Routes of the status API.
const (
	RouteStream = "status.stream"
	RouteDetail = "status.detail"
)

// Config configures a daemon's status page and API.
type Config struct {
	Kind     Kind
	Gatherer prometheus.Gatherer
	// Ready is the daemon's readiness (its /readyz); nil is always ready.
	Ready     func() error
	Providers []Provider
	// Tokens, when set, are required: each request carries one as bearer
	// authentication metadata.
	Tokens *auth.Tokens
	// Full reports whether an identity sees everything; the others see
	// only the readiness. nil: every valid token sees everything.
	Full func(auth.Identity) bool
	// Interval between snapshots (default 1s).
	Interval time.Duration
	Log      *slog.Logger
}

//go:embed page.html
var page []byte

// Handler serves the page at / and the RSocket API at /rsocket until ctx
// ends (then its connections are closed). Anything else is 404, so it can
// be mounted at / of a mux that serves /metrics beside it.
func Handler(ctx context.Context, cfg Config) http.Handler {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	ws := rsocket.WebSocketHandler(ctx, &responder{cfg: cfg})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			h := w.Header()
			h.Set("Content-Type", "text/html; charset=utf-8")
			h.Set("Cache-Control", "no-store")
			// The page loads nothing from anywhere: everything is inline,
			// and it connects only back to this listener.
			h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'")
			w.Write(page)
		case "/rsocket":
			if !sameOrigin(r) {
				http.Error(w, "status: cross-origin WebSocket refused", http.StatusForbidden)
				return
			}
			ws.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

// sameOrigin refuses a WebSocket opened by another site's page in the
// operator's browser (which could otherwise read the status of a daemon
// without tokens, as it cannot read /metrics). Browsers always send
// Origin; other clients send none and are let through.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

type responder struct {
	rsocket.UnimplementedResponder
	cfg Config
}

// scope is what one request may see.
type scope struct {
	identity string
	limited  bool
}

func reject(format string, args ...any) error {
	return &rsocket.Error{Code: frame.ErrorCodeRejected, Message: fmt.Sprintf(format, args...)}
}

// request reads the route and the bearer token from composite metadata
// and checks the token.
func (r *responder) request(md []byte) (route string, sc scope, err error) {
	var token []byte
	var haveToken bool
	it := extension.Composite(md)
	for it.Next() {
		e := it.Entry()
		switch {
		case e.IsMIME(extension.RoutingMIME):
			tag, ok, err := extension.FirstRoute(e.Metadata)
			if err != nil {
				return "", sc, &rsocket.Error{Code: frame.ErrorCodeInvalid, Message: "bad routing metadata: " + err.Error()}
			}
			if ok {
				route = string(tag)
			}
		case e.IsMIME(extension.AuthenticationMIME):
			a, err := extension.ParseAuth(e.Metadata)
			if err != nil {
				return "", sc, reject("unauthorized: bad authentication metadata: %v", err)
			}
			if token, haveToken = a.Bearer(); !haveToken {
				return "", sc, reject("unauthorized: only bearer tokens are accepted")
			}
		}
	}
	if err := it.Err(); err != nil {
		return "", sc, &rsocket.Error{Code: frame.ErrorCodeInvalid, Message: "bad composite metadata: " + err.Error()}
	}
	if r.cfg.Tokens == nil {
		return route, sc, nil
	}
	if !haveToken || len(token) == 0 {
		return "", sc, reject("unauthorized: this daemon requires a token")
	}
	id, ok := r.cfg.Tokens.Lookup(string(token))
	if !ok {
		return "", sc, reject("unauthorized: token not valid")
	}
	sc.identity = id.AgentID
	sc.limited = r.cfg.Full != nil && !r.cfg.Full(id)
	return route, sc, nil
}

// snapshot gathers the registry and builds what sc may see.
func (r *responder) snapshot(sc scope, now time.Time) Snapshot {
	var err error
	if r.cfg.Ready != nil {
		err = r.cfg.Ready()
	}
	ready, words := readiness(r.cfg.Kind, err)
	if sc.limited {
		return Snapshot{Kind: r.cfg.Kind, Time: now, Ready: ready, Readiness: words, Identity: sc.identity, Limited: true}
	}
	fs, gerr := gather(r.cfg.Gatherer)
	if gerr != nil {
		r.cfg.Log.Warn("status: gathering metrics", "err", gerr) // a partial gather still serves
	}
	s := build(r.cfg.Kind, fs)
	s.Time, s.Ready, s.Readiness, s.Identity = now, ready, words, sc.identity
	if !ready {
		s.Errors.Last = words
	}
	for _, p := range r.cfg.Providers {
		p(&s)
	}
	return s
}

func (r *responder) RequestStream(ctx context.Context, p rsocket.Payload, out *rsocket.Sink) error {
	route, sc, err := r.request(p.Metadata)
	if err != nil {
		return err
	}
	if route != RouteStream {
		return &rsocket.Error{Code: frame.ErrorCodeInvalid, Message: fmt.Sprintf("no stream route %q (want %s)", route, RouteStream)}
	}
	tick := time.NewTicker(r.cfg.Interval)
	defer tick.Stop()
	var prev *Snapshot
	for seq := uint64(1); ; seq++ {
		s := r.snapshot(sc, time.Now())
		s.Seq = seq
		rate(&s, prev)
		prev = &s
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		// Send waits for a credit: a requester that grants none gets
		// nothing, and nothing piles up here.
		if err := out.Send(rsocket.Payload{Data: b}); err != nil {
			return nil // cancelled or the connection closed
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// DetailRequest is the data of a status.detail request.
type DetailRequest struct {
	// Section: throughput, agent, sink, xfer, errors, or all (every
	// sluice_* series).
	Section string `json:"section"`
}

// Detail is the response of status.detail.
type Detail struct {
	Kind    Kind     `json:"kind"`
	Section string   `json:"section"`
	Samples []Sample `json:"samples"`
	Uploads []Upload `json:"uploads,omitempty"` // xfer only
}

var sections = map[string]bool{"throughput": true, "agent": true, "sink": true, "xfer": true, "errors": true, "all": true}

func (r *responder) RequestResponse(ctx context.Context, p rsocket.Payload) (rsocket.Payload, error) {
	route, sc, err := r.request(p.Metadata)
	if err != nil {
		return rsocket.Payload{}, err
	}
	if route != RouteDetail {
		return rsocket.Payload{}, &rsocket.Error{Code: frame.ErrorCodeInvalid, Message: fmt.Sprintf("no request-response route %q (want %s)", route, RouteDetail)}
	}
	var req DetailRequest
	if err := json.Unmarshal(p.Data, &req); err != nil || !sections[req.Section] {
		return rsocket.Payload{}, &rsocket.Error{Code: frame.ErrorCodeInvalid,
			Message: `want JSON {"section": "throughput"|"agent"|"sink"|"xfer"|"errors"|"all"}`}
	}
	if sc.limited {
		return rsocket.Payload{}, reject("forbidden: the token of %q sees the readiness only", sc.identity)
	}
	fs, _ := gather(r.cfg.Gatherer)
	section := req.Section
	if section == "all" {
		section = ""
	}
	d := Detail{Kind: r.cfg.Kind, Section: req.Section, Samples: fs.samples(r.cfg.Kind, section)}
	if d.Samples == nil {
		d.Samples = []Sample{}
	}
	if req.Section == "xfer" {
		s := Snapshot{Xfer: &XferStatus{}}
		for _, p := range r.cfg.Providers {
			p(&s)
		}
		d.Uploads = s.Xfer.Uploads
	}
	b, err := json.Marshal(d)
	return rsocket.Payload{Data: b}, err
}

// Metadata returns the composite metadata of a request to route, with the
// token as bearer authentication when it is not "": what a Go client of
// the status API sends.
func Metadata(route, token string) ([]byte, error) {
	r, err := extension.AppendRouting(nil, route)
	if err != nil {
		return nil, err
	}
	b, err := extension.AppendCompositeWellKnown(nil, extension.MIMERSocketRouting, r)
	if err != nil || token == "" {
		return b, err
	}
	return extension.AppendCompositeWellKnown(b, extension.MIMERSocketAuthentication, extension.AppendAuthBearer(nil, token))
}
