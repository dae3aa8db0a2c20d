// Package s3test starts a real S3 object store for tests: SeaweedFS's
// `weed mini`, through scripts/seaweedfs.sh, which builds the weed binary
// once (about 4 minutes on 2 cores, cached in ~/.cache/sluice).
//
// One weed serves every test of a test binary (each test under a prefix
// of its own in bucket "sluice"); the script's watchdog stops it and
// removes its data when the test binary exits.
//
// Environment:
//
//	SLUICE_S3=skip      skip every test that calls Start
//	SLUICE_S3=require   fail, instead of skip, when weed cannot be built or run here
//	SLUICE_S3_ENDPOINT  use that running S3 endpoint (bucket "sluice", the
//	                    AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY of the environment)
package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/kafkash"
	"github.com/sluicehq/sluice/internal/testkit/testskip"
)

// Part names SeaweedFS in the skip summary.
const Part = "SeaweedFS (S3 object store: scripts/seaweedfs.sh build)"

// Bucket is the bucket the script creates.
const Bucket = "sluice"

// Credentials the script gives weed when the environment has none.
const (
	AccessKey = "sluice"
	SecretKey = "sluice-secret"
)

// exitUnavailable is seaweedfs.sh's "weed cannot be built here".
const exitUnavailable = 3

// Store is a running S3 endpoint.
type Store struct {
	Endpoint string // http://127.0.0.1:PORT
	Bucket   string
}

// URL is a --store URL for prefix under the bucket.
func (s *Store) URL(prefix string) string {
	return "s3://" + s.Bucket + "/" + prefix + "?endpoint=" + s.Endpoint
}

var (
	once   sync.Once
	shared *Store
	why    string // why there is none: "unavailable: ..." or a failure
	absent bool   // weed cannot run here (skip, or fail with require)
)

// Start returns the test binary's weed, starting it on first use, and
// sets AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY for the test (the
// identity weed was started with). It skips (or fails with
// SLUICE_S3=require) when weed cannot be built here.
func Start(t testing.TB) *Store {
	t.Helper()
	if os.Getenv("SLUICE_S3") == "skip" {
		testskip.Missing(t, "", Part, "s3test: SLUICE_S3=skip")
	}
	once.Do(start)
	if absent {
		testskip.Missing(t, "SLUICE_S3", Part, "s3test: SeaweedFS cannot run here, skipping (scripts/seaweedfs.sh build installs it): "+why)
	}
	if shared == nil {
		t.Fatalf("s3test: %s", why)
	}
	if os.Getenv("SLUICE_S3_ENDPOINT") == "" || os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	}
	return shared
}

func start() {
	if ep := os.Getenv("SLUICE_S3_ENDPOINT"); ep != "" {
		shared = &Store{Endpoint: ep, Bucket: Bucket}
		return
	}
	root, err := kafkash.RepoRoot()
	if err != nil {
		why = err.Error()
		return
	}
	script := filepath.Join(root, "scripts", "seaweedfs.sh")
	dir, err := os.MkdirTemp("", "sluice-seaweedfs-test-")
	if err != nil {
		why = err.Error()
		return
	}
	os.Remove(dir) // the script makes it, with its marker
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, "start", "--dir", dir, "--watch-pid", strconv.Itoa(os.Getpid()))
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+AccessKey, "AWS_SECRET_ACCESS_KEY="+SecretKey)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == exitUnavailable {
		absent, why = true, lastLine(errb.String())
		return
	}
	if err != nil {
		why = fmt.Sprintf("%s start: %v\n%s", script, err, errb.String())
		return
	}
	ep := lastLine(out.String())
	if !strings.HasPrefix(ep, "http://127.0.0.1:") {
		why = fmt.Sprintf("%s start printed %q, not an endpoint\n%s", script, out.String(), errb.String())
		return
	}
	shared = &Store{Endpoint: ep, Bucket: Bucket}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
