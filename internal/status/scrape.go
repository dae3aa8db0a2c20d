package status

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MaxScrapesInFlight bounds the /metrics requests a daemon serves at
// once; further ones are answered 503 at once. Each gathers every metric
// and holds them until its response is written: 100 clients reconnecting
// in a loop, each sending a request and resetting the connection, kept
// thousands of gathers in flight on the sink's metrics listener (440 MB of
// live heap, 903 MB RSS; docs/reliability.md, Hostile clients on every
// listener). Prometheus scrapes one target with one request at a time.
const MaxScrapesInFlight = 8

// MetricsHandler serves g's metrics in the Prometheus formats, at most
// MaxScrapesInFlight requests at once.
func MetricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{MaxRequestsInFlight: MaxScrapesInFlight})
}
