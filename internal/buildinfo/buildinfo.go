// Package buildinfo reads what the Go toolchain stamped into the running
// binary: the main module's version and the VCS revision it was built from.
// `sluice version`, the sluice_build_info metric and the bench reports all
// use it, so they name a build the same way.
package buildinfo

import "runtime/debug"

// Version returns the main module's version from the build info, or
// "devel" when there is none (go build in a checkout stamps "(devel)";
// some builds carry no build info at all).
func Version() string {
	bi, _ := debug.ReadBuildInfo()
	return version(bi)
}

// Revision returns the VCS revision the binary was built from, with
// "-dirty" appended when the tree had uncommitted changes, or "" when the
// build carries no VCS stamp (go run, go test, or a build outside a
// repository or with -buildvcs=false).
func Revision() string {
	bi, _ := debug.ReadBuildInfo()
	return revision(bi)
}

func version(bi *debug.BuildInfo) string {
	if bi == nil || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return "devel"
	}
	return bi.Main.Version
}

func revision(bi *debug.BuildInfo) string {
	if bi == nil {
		return ""
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}
