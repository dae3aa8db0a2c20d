package status

// MetricsHelp is the help of a daemon's --metrics flag: what Serve
// serves there, with the status page (page) when the daemon passes one.
// example is an address to show; tokens the flag whose tokens the page
// requires, if any.
func MetricsHelp(page bool, example, tokens string) string {
	s := "serve HTTP on HOST:PORT"
	if example != "" {
		s += " (e.g. " + example + ")"
	}
	s += ": /metrics (Prometheus), /healthz (200 while healthy), /readyz (200 once ready)"
	if page {
		s += ",\nthe status page at / and its RSocket API at /rsocket (WebSocket)"
		if tokens != "" {
			s += "; the page asks for a token of " + tokens + " when that is set"
		}
	}
	return s
}
