package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/buildinfo"
)

// version is the release, set at build time with
// -ldflags "-X main.version=v1.2.3"; empty means: ask the build info.
var version = ""

func init() {
	register("version", "print the version, the commit it was built from and the Go version", runVersion)
}

// buildVersion returns the version, the VCS revision ("unknown" when the
// binary was built outside a repository, as tests are) and the Go version.
func buildVersion() (ver, revision, goVersion string) {
	ver, revision, goVersion = version, buildinfo.Revision(), runtime.Version()
	if ver == "" {
		ver = buildinfo.Version()
	}
	if revision == "" {
		revision = "unknown"
	}
	return
}

func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ver, rev, gov := buildVersion()
	fmt.Fprintf(stdout, "sluice %s\ncommit %s\n%s\n", ver, rev, gov)
	return nil
}

// buildInfoGauge is sluice_build_info{version,revision,goversion} = 1, so
// dashboards can tell which build each process runs.
func buildInfoGauge() prometheus.Gauge {
	ver, rev, gov := buildVersion()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "sluice_build_info",
		Help:        "Always 1; the labels say which build of sluice this process runs.",
		ConstLabels: prometheus.Labels{"version": ver, "revision": rev, "goversion": gov},
	})
	g.Set(1)
	return g
}
