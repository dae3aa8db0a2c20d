package status

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MaxScrapesInFlight bounds the /metrics requests a daemon gathers for at
// once; each gathers every metric and holds them until its response is
// written. Without it, 100 clients reconnecting in a loop, each sending a
// request with part of a body and resetting the connection, took the
// sink's metrics listener to 903 MB RSS and 440 MB of live heap
// (docs/reliability.md, Hostile clients on every listener): requests
// came faster than they were served, and a request whose body is unread
// is not seen to go. Prometheus scrapes one target with one request at a
// time.
const MaxScrapesInFlight = 8

// scrapeWait bounds how long a scrape waits for one of the
// MaxScrapesInFlight; then it is answered 503.
const scrapeWait = 5 * time.Second

// MetricsHandler serves g's metrics in the Prometheus formats to GET and
// HEAD without a body (anything else: 405 or 400, nothing gathered), gathering for at most
// MaxScrapesInFlight requests at once; the others wait their turn, and
// leave the queue when their client goes.
func MetricsHandler(g prometheus.Gatherer) http.Handler {
	h := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	sem := make(chan struct{}, MaxScrapesInFlight)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "GET /metrics", http.StatusMethodNotAllowed)
			return
		}
		if r.ContentLength != 0 {
			// A scrape has no body. Refused before any wait: a request
			// with a body it does not send is not seen to go when its
			// client resets (net/http watches the connection only once
			// the body is read), so such requests queued up by the
			// thousand (239 MB of live heap for 100 clients resetting
			// in a loop).
			http.Error(w, "GET /metrics has no body", http.StatusBadRequest)
			return
		}
		t := time.NewTimer(scrapeWait)
		defer t.Stop()
		select {
		case sem <- struct{}{}:
		case <-r.Context().Done():
			return
		case <-t.C:
			http.Error(w, "too many scrapes at once", http.StatusServiceUnavailable)
			return
		}
		defer func() { <-sem }()
		if r.Context().Err() != nil {
			return
		}
		h.ServeHTTP(w, r)
	})
}
