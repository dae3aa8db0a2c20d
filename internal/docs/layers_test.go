package docs

import (
	"slices"
	"sort"
	"strings"
	"testing"
)

// The module's packages in layers, top first. A package may import the
// packages of its own layer and of the layers below, never above: the
// product (everything from "entry points" down) cannot reach the lab or
// the test kit, the test kit cannot reach the lab, and the foundations
// cannot reach what is built on them. A pattern is a package path, or a
// path ending in "/..." for it and everything under it. Every package must
// match one layer, so a new package is placed here on purpose.
// README.md ("What is here") says what the lab and the test kit hold.
var packageLayers = []struct {
	name     string
	patterns []string
}{
	// internal/docs has no code, only these tests.
	{"programs and doc checks", []string{"cmd/...", "internal/docs"}},
	// The benchmark lab: what `sluice bench`, `sluice netem`, `sluice
	// hostile` and the simulation run; only cmd/sluice and tests use it.
	{"lab", []string{"internal/lab/..."}},
	// What tests (and the lab) use: never linked into the daemons.
	{"testkit", []string{"internal/testkit/..."}},
	{"entry points", []string{"client", "internal/status", "internal/cli", "internal/lines", "internal/logcheck", "internal/rsocketcall"}},
	{"daemons", []string{"internal/agent/...", "internal/sink", "internal/export", "internal/rsproxy", "internal/rsocketd", "internal/xfer/serve", "internal/xfer/send"}},
	// File transfer's contract, its store and its transport adapters:
	// serve and send, above, put them together.
	{"transports and stores", []string{"internal/transport/...", "internal/store/...", "internal/xfer", "internal/xfer/diskstore", "internal/xfer/s3store", "internal/xfer/openstore",
		"internal/xfer/grpcxfer", "internal/xfer/rsocketxfer", "internal/xfer/tus", "internal/xfer/post"}},
	{"delivery protocol", []string{"internal/protocol", "internal/delivery", "internal/storedmsg", "internal/auth"}},
	{"libraries", []string{"rsocket/...", "seglog"}},
	{"foundations", []string{"internal/batch", "internal/kafkarec", "internal/buildinfo", "internal/cliflag", "internal/codec", "internal/defaults", "internal/dirlock",
		"internal/fields", "internal/idleread", "internal/telemetry", "internal/telemetry/rwcodec", "internal/logutil", "internal/memrelease", "internal/connlimit", "internal/progress", "internal/wire"}},
	{"generated protobuf", []string{"api/..."}},
}

// inPattern reports whether pkg (a path relative to the module) matches
// a pattern of packageLayers.
func inPattern(pkg, pattern string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == dir || strings.HasPrefix(pkg, dir+"/")
	}
	return pkg == pattern
}

// layersOf returns the indexes in packageLayers of the layers whose
// patterns match pkg: one, unless the table is wrong.
func layersOf(pkg string) []int {
	var in []int
	for i, l := range packageLayers {
		for _, p := range l.patterns {
			if inPattern(pkg, p) {
				in = append(in, i)
				break
			}
		}
	}
	return in
}

// TestPackageLayers: every package is in exactly one of the layers above,
// and the package graph (non-test imports) has no upward edge between them.
func TestPackageLayers(t *testing.T) {
	pkgs := modulePackages(t)
	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	layer := map[string]int{}
	for _, p := range names {
		switch in := layersOf(p); len(in) {
		case 1:
			layer[p] = in[0]
		case 0:
			t.Errorf("%s is in no layer: add it to packageLayers (internal/docs/layers_test.go)", p)
		default:
			t.Errorf("%s is in %d layers of packageLayers; a package belongs to one", p, len(in))
		}
	}
	for _, p := range names {
		from, ok := layer[p]
		if !ok {
			continue
		}
		for _, d := range pkgs[p] {
			if to, ok := layer[d]; ok && to < from {
				t.Errorf("%s (layer %q) imports %s (layer %q), a layer above it", p, packageLayers[from].name, d, packageLayers[to].name)
			}
		}
	}
}

// TestProductImportsNoLabOrTestkit: what ships is apart from what measures
// and tests it. No package outside internal/lab and internal/testkit
// imports them in its non-test files, except that cmd/sluice runs the lab
// (`sluice bench`, `sluice netem`, `sluice hostile`); the lab may use the
// test kit (syncbuf). Test files may import either. TestPackageLayers
// implies this; it is spelled out so that its failure says what is wrong.
func TestProductImportsNoLabOrTestkit(t *testing.T) {
	under := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	for p, deps := range modulePackages(t) {
		for _, d := range deps {
			switch {
			case under(d, "internal/lab") && !under(p, "internal/lab") && !under(p, "cmd"):
				t.Errorf("%s imports %s: only cmd/ and the lab itself may import internal/lab", p, d)
			case under(d, "internal/testkit") && !under(p, "internal/testkit") && !under(p, "internal/lab"):
				t.Errorf("%s imports %s outside its tests: only tests, the test kit and the lab may import internal/testkit", p, d)
			}
		}
	}
}

// publicInternalImports lists what a public package (one outside
// internal/, cmd/ and api/) may import under internal/. The RSocket
// library (rsocket/...) and seglog are meant to be used, and moved, apart
// from sluice's internals, so they import none, with one exception: the
// durable resume journal uses two foundations (the directory lock and
// the record field codec). client is sluice's own delivery client, built
// on the agent: every internal package it needs is allowed ("*").
var publicInternalImports = map[string][]string{
	"client":                {"*"},
	"rsocket/resumejournal": {"internal/dirlock", "internal/fields"},
}

// TestPublicPackagesImportNoInternal: a public package imports under
// internal/ only what publicInternalImports allows it, and package
// rsocket imports neither internal/ nor seglog: the resume journal, the
// one part that stores, is rsocket/resumejournal behind ResumeStore and
// its optional interfaces (issue 25).
func TestPublicPackagesImportNoInternal(t *testing.T) {
	under := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	for p, deps := range modulePackages(t) {
		if under(p, "internal") || under(p, "cmd") || under(p, "api") {
			continue
		}
		allowed := publicInternalImports[p]
		for _, d := range deps {
			switch {
			case p == "rsocket" && d == "seglog":
				t.Errorf("rsocket imports seglog: the resume journal belongs in rsocket/resumejournal")
			case !under(d, "internal") || slices.Contains(allowed, "*") || slices.Contains(allowed, d):
			default:
				t.Errorf("public package %s imports %s: only publicInternalImports (internal/docs/layers_test.go) may allow it", p, d)
			}
		}
	}
}
