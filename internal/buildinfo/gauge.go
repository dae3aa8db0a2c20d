package buildinfo

import "github.com/prometheus/client_golang/prometheus"

// Gauge is sluice_build_info{version,revision,goversion} = 1, so that
// dashboards can tell which build each process runs.
func Gauge(version, revision, goVersion string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "sluice_build_info",
		Help:        "Always 1; the labels say which build of sluice this process runs.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goVersion},
	})
	g.Set(1)
	return g
}
