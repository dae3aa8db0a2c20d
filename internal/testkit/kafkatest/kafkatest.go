// Package kafkatest starts a real single-node Kafka broker for tests, through scripts/kafka.sh.
//
// Each Start gets its own broker (KRaft, combined broker+controller, on free
// 127.0.0.1 ports) in a fresh directory, stopped and removed when the test
// ends; if the test binary dies first (a -timeout panic, a kill), a watchdog
// started by the script stops the broker within seconds. The script fetches
// the Kafka jars from Maven Central once (cached in ~/.cache/sluice) and
// installs Java and Maven with apt-get if they are missing; a fresh broker is
// ready in 3-7 s, a restarted one in 2-6 s, and takes about 320 MB of RSS.
//
// Environment:
//
//	SLUICE_KAFKA=skip               skip every test that calls Start
//	SLUICE_KAFKA=require            fail, instead of skip, when Kafka cannot run here
//	SLUICE_KAFKA_BOOTSTRAP=host:port use that running broker instead of starting one
//	                                (Stop, Kill and Restart then skip the test)
package kafkatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/kafkash"
	"github.com/sluicehq/sluice/internal/testkit/testskip"
)

const (
	// exitUnavailable is kafka.sh's exit code for "Kafka cannot run on this
	// machine" (no Java or Maven and no way to install them, no Maven Central).
	exitUnavailable = 3

	// startTimeout bounds one kafka.sh start: a first run may install Java
	// and Maven and download the jars; the script's own readiness wait is 90 s.
	startTimeout = 15 * time.Minute
	stopTimeout  = 2 * time.Minute
)

// Broker is a single-node Kafka broker started by Start.
type Broker struct {
	// Addr is the bootstrap address, 127.0.0.1:PORT. It stays the same
	// across Stop and Restart.
	Addr string

	t      testing.TB
	script string // path of scripts/kafka.sh; "" for an external broker
	dir    string // the broker's run dir (config, data, logs)
}

// Start runs scripts/kafka.sh start with a fresh run dir under t.TempDir(),
// registers t.Cleanup to stop the broker and remove its data, and returns the
// broker once it answers metadata requests.
//
// If the script cannot run at all on this machine (no Java and no way to
// install it, no Maven, no network to Maven Central), Start calls t.Skip with
// the reason; any other failure is t.Fatal. SLUICE_KAFKA=skip skips
// explicitly, SLUICE_KAFKA=require turns those skips into failures, and
// SLUICE_KAFKA_BOOTSTRAP=host:port uses an already running broker.
func Start(t testing.TB) *Broker {
	t.Helper()
	if os.Getenv("SLUICE_KAFKA") == "skip" {
		testskip.Missing(t, "", testskip.Kafka, "kafkatest: SLUICE_KAFKA=skip")
	}
	if addr := os.Getenv("SLUICE_KAFKA_BOOTSTRAP"); addr != "" {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			t.Fatalf("kafkatest: SLUICE_KAFKA_BOOTSTRAP=%q: %v", addr, err)
		}
		return &Broker{Addr: addr, t: t}
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		unavailable(t, "bash not found: scripts/kafka.sh cannot run")
	}
	b := &Broker{
		t:      t,
		script: filepath.Join(root, "scripts", "kafka.sh"),
		// TempDir registers its removal first, so the Cleanup below (which
		// runs before it) stops the broker before its directory goes away.
		dir: filepath.Join(t.TempDir(), "kafka"),
	}
	t.Cleanup(b.cleanup)
	b.start()
	return b
}

// Stop stops the broker (SIGTERM, a clean shutdown) and keeps its data and
// port, for Restart.
func (b *Broker) Stop() {
	b.t.Helper()
	b.stop("Stop", "--keep-data")
}

// Kill stops the broker with SIGKILL, as a crash, keeping its data and port,
// for Restart.
func (b *Broker) Kill() {
	b.t.Helper()
	b.stop("Kill", "--keep-data", "--kill")
}

// Restart starts the broker again on the same port and data, and waits until
// it is ready. It does nothing if the broker is running.
func (b *Broker) Restart() {
	b.t.Helper()
	b.external("Restart")
	addr := b.Addr
	b.start()
	if b.Addr != addr {
		b.t.Fatalf("kafkatest: restarted broker is on %s, was %s", b.Addr, addr)
	}
}

// LogFile is the broker's log (server.log), for debugging; "" for an
// external broker.
func (b *Broker) LogFile() string {
	if b.script == "" {
		return ""
	}
	return filepath.Join(b.dir, "logs", "server.log")
}

func (b *Broker) external(op string) {
	b.t.Helper()
	if b.script == "" {
		b.t.Skipf("kafkatest: %s needs a broker started by kafkatest, not SLUICE_KAFKA_BOOTSTRAP=%s", op, b.Addr)
	}
}

func (b *Broker) start() {
	b.t.Helper()
	stdout, stderr, err := b.run(startTimeout, "start", "--dir", b.dir, "--watch-pid", strconv.Itoa(os.Getpid()))
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() == exitUnavailable:
		unavailable(b.t, unavailableReason(stderr))
	case err != nil:
		b.t.Fatalf("kafkatest: %s start: %v\n%s", b.script, err, stderr)
	}
	addr := lastLine(stdout)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		b.t.Fatalf("kafkatest: %s start printed %q, not a bootstrap address\n%s", b.script, stdout, stderr)
	}
	b.Addr = addr
	b.t.Logf("kafkatest: broker %s (%s)\n%s", addr, b.dir, strings.TrimSpace(stderr))
}

func (b *Broker) stop(op string, flags ...string) {
	b.t.Helper()
	b.external(op)
	args := append([]string{"stop", "--dir", b.dir}, flags...)
	if _, stderr, err := b.run(stopTimeout, args...); err != nil {
		b.t.Fatalf("kafkatest: %s %s: %v\n%s", b.script, strings.Join(args, " "), err, stderr)
	}
}

func (b *Broker) cleanup() {
	if b.t.Failed() {
		if tail := tailFile(b.LogFile(), 40); tail != "" {
			b.t.Logf("kafkatest: last lines of %s:\n%s", b.LogFile(), tail)
		}
	}
	if _, stderr, err := b.run(stopTimeout, "stop", "--dir", b.dir); err != nil {
		b.t.Errorf("kafkatest: %s stop: %v\n%s", b.script, err, stderr)
	}
}

func (b *Broker) run(timeout time.Duration, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{b.script}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v: %w", timeout, err)
	}
	return out.String(), errb.String(), err
}

// unavailable skips (or, with SLUICE_KAFKA=require, fails) a test that
// cannot have a broker on this machine.
func unavailable(t testing.TB, why string) {
	t.Helper()
	testskip.Missing(t, "SLUICE_KAFKA", testskip.Kafka,
		"kafkatest: Kafka cannot run here, skipping (set SLUICE_KAFKA_BOOTSTRAP to use a running broker): "+why)
}

// repoRoot finds the module root holding scripts/kafka.sh (kafkash.RepoRoot).
func repoRoot() (string, error) { return kafkash.RepoRoot() }

func findRoot(dir string) (string, bool) { return kafkash.FindRoot(dir) }

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// unavailableReason picks kafka.sh's "unavailable: ..." line out of its stderr.
func unavailableReason(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if _, why, ok := strings.Cut(lines[i], "unavailable: "); ok {
			return why
		}
	}
	return strings.TrimSpace(stderr)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func tailFile(path string, n int) string {
	if path == "" {
		return ""
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
