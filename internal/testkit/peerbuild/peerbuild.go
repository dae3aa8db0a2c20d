// Package peerbuild finds, and builds when need be, the peers of `sluice
// bench rr` (rsocket-go's rrpeer, the Redis clients' redispeer) and `sluice
// bench rsocket` (rsgo-bench), each in a module of its own under interop/.
// It is apart from package peers, which only tests import, so that the
// sluice binary does not link package testing.
package peerbuild

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// RSGoBenchBuildHint says how to build the rsgo-bench peer of `sluice
// bench rsocket`.
const RSGoBenchBuildHint = "cd interop/rsocket-go && go build -o rsgo-bench ./cmd/rsgo-bench (then pass --rsocket-go interop/rsocket-go/rsgo-bench or put it on PATH)"

// RSGoBench returns the rsgo-bench peer binary: on PATH, else built in
// interop/rsocket-go above the working directory; "" if there is none.
func RSGoBench() string {
	if p, err := exec.LookPath("rsgo-bench"); err == nil {
		return p
	}
	if dir, err := above(filepath.Join("interop", "rsocket-go", "rsgo-bench")); err == nil {
		return filepath.Join(dir, "interop", "rsocket-go", "rsgo-bench")
	}
	return ""
}

// RRPeer returns rsocket-go's echo server for `sluice bench rr`: path if
// given, else Build's rrpeer from interop/rsocket-go.
func RRPeer(ctx context.Context, path string, progress io.Writer) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", err
		}
		return path, nil
	}
	out, err := Build(ctx, "rsocket-go", "rrpeer", progress)
	if err != nil && errors.Is(err, errNotFound) {
		err = fmt.Errorf("%w (or pass --rrpeer)", err)
	}
	return out, err
}

// errNotFound is Build's error when the module is not above the working
// directory (a sluice binary run outside the repository).
var errNotFound = errors.New("not found above the working directory")

// Build returns a peer of `sluice bench rr`, interop/module/cmd/name in
// its own module, built from the module found above the working
// directory into the user cache directory and rebuilt each time (go build
// is quick when nothing changed); progress hears of it.
func Build(ctx context.Context, module, name string, progress io.Writer) (string, error) {
	src := filepath.Join("interop", module, "cmd", name)
	dir, err := above(src)
	if err != nil {
		return "", fmt.Errorf("%s %w", src, errNotFound)
	}
	if _, err := exec.LookPath("go"); err != nil {
		return "", fmt.Errorf("building %s needs the go command", name)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	out := filepath.Join(cache, "sluice", name)
	fmt.Fprintf(progress, "building %s ...\n", out)
	bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(bctx, "go", "build", "-o", out, "./cmd/"+name)
	cmd.Dir = filepath.Join(dir, "interop", module)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %v: %s", name, err, strings.TrimSpace(string(b)))
	}
	return out, nil
}

// above returns the nearest directory at or above the working directory
// that holds rel.
func above(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, rel)); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s not found above the working directory; run from the repository", rel)
		}
		dir = parent
	}
}
