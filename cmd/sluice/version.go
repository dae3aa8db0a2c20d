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

// buildInfoGauge is sluice_build_info for this build.
func buildInfoGauge() prometheus.Gauge { return buildinfo.Gauge(buildVersion()) }
