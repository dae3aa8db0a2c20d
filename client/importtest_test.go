package client_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportFromAnotherModule builds and runs internal/importtest, a
// module of its own that requires github.com/sluicehq/sluice, as a user's
// module would: it proves the client is importable (nothing it exports
// needs an internal package) and usable through its public API alone.
// The module is copied to a temporary directory with its replace
// directive pointing here, so neither go mod tidy nor a dependency bump
// of this module ever edits the repository; it runs offline
// (GOPROXY=off): the nested module needs nothing this one does not
// already require to build and test. go mod tidy runs with -e: tidy also
// resolves the imports of our dependencies' own tests (gonum for
// hdrhistogram-go's, github.com/golang/protobuf for grpc's, ...), which
// nothing here builds, and which a fresh module cache does not hold; on
// such a machine (only what `go test ./...` downloaded) tidy failed with
// "module lookup disabled by GOPROXY=off" unless `go mod download all` had
// run first, as only .ci/run did (issue 23). A module the build does need
// and the cache lacks still fails, in go vet.
func TestImportFromAnotherModule(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot build a separate module")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join("internal", "importtest")
	dir := t.TempDir()
	for _, name := range []string{"go.mod", "main_test.go"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "go.mod" {
			if !bytes.Contains(b, []byte("=> ../../..")) {
				t.Fatal("internal/importtest/go.mod must replace github.com/sluicehq/sluice with ../../..")
			}
			b = bytes.ReplaceAll(b, []byte("=> ../../.."), []byte("=> "+root))
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The checksums of this module's dependencies are all the nested one
	// needs; with them go mod tidy asks no checksum database.
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	// GOSUMDB=off: with GOPROXY=off the checksum database is asked
	// directly, not through the proxy, and CI's machine cannot reach it.
	// tidy -e reads go.mod files of versions this module's go.sum does not
	// list (older genproto that a dependency's test graph names) whenever
	// the module cache happens to hold them (a `go install` or the weed
	// build put them there): CI failed on exactly that. Nothing new can
	// enter the cache with GOPROXY=off, and what is in it was verified
	// when it was downloaded.
	env := append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOSUMDB=off", "GOFLAGS=-mod=mod")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(goBin, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in a separate module: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("go %s:\n%s", strings.Join(args, " "), out)
	}
	run("mod", "tidy", "-e")
	// A user's module need not raise its go line to import the client:
	// sluice's go line is the minimum its code and dependencies need
	// (go 1.26.0; go 1.26.8 forced every importer to 1.26.8), so tidy
	// leaves the importer's go 1.26.0 alone (issue 24).
	if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err != nil || !bytes.Contains(b, []byte("\ngo 1.26.0\n")) {
		t.Errorf("go mod tidy raised the importing module's go line (want go 1.26.0): %v\n%s", err, b)
	}
	run("vet", "./...")
	run("test", "-count=1", "./...")
}
