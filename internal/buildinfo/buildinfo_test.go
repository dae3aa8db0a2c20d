package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestVersionAndRevision(t *testing.T) {
	stamp := func(ver string, kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Version: ver}}
		for i := 0; i+1 < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	for _, tc := range []struct {
		name     string
		bi       *debug.BuildInfo
		ver, rev string
	}{
		{"no build info", nil, "devel", ""},
		{"go test", stamp(""), "devel", ""},
		{"checkout", stamp("(devel)", "vcs.revision", "abc123", "vcs.modified", "false"), "devel", "abc123"},
		{"dirty checkout", stamp("(devel)", "vcs.modified", "true", "vcs.revision", "abc123"), "devel", "abc123-dirty"},
		{"dirty without revision", stamp("v1.2.3", "vcs.modified", "true"), "v1.2.3", ""},
		{"module version", stamp("v1.2.3"), "v1.2.3", ""},
	} {
		if got := version(tc.bi); got != tc.ver {
			t.Errorf("%s: version %q, want %q", tc.name, got, tc.ver)
		}
		if got := revision(tc.bi); got != tc.rev {
			t.Errorf("%s: revision %q, want %q", tc.name, got, tc.rev)
		}
	}
	if Version() == "" {
		t.Error("Version() is empty")
	}
}
