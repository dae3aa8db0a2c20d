// Package testskip skips the tests that need a part this machine lacks
// (Kafka, an interop peer, Chromium, root for a tmpfs) and says so at the
// end of the run. It is for tests only.
//
// `go test ./...` shows nothing of a passing package but its "ok" line, so
// a skipped test is invisible without -v, and a run without the parts
// looked like a run of everything (issue 23). Missing records each such
// skip in a file shared by the test binaries of one go command (keyed by
// its pid and start time: each package's test binary is the go command's
// child), and the first binary to record one starts a watcher (the same
// binary run again, see init) that waits for the go command to exit and
// then prints the summary on the go command's standard error, so that it
// is the last thing the run prints:
//
//	sluice: 14 tests skipped, for what this machine lacks (go test -v names them):
//	  Kafka: 9 (cmd/sluice, internal/testkit/kafkatest, internal/sink); SLUICE_KAFKA=require fails them instead
//	  ...
//	sluice: scripts/test-all.sh installs the parts and runs everything (as root for the tmpfs tests)
//
// Where the go command is not the parent (a test binary run by hand, go
// test -exec) or /proc is missing, Missing only skips.
package testskip

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Parts, the usual values of Missing's part.
const (
	Kafka   = "Kafka"
	Interop = "interop peers (rsocket-py, rsocket-java, rsocket-js, tuspy, tus-js-client)"
	Browser = "Chromium"
	Root    = "root (a tmpfs for the real disk-full tests)"
)

// envWatch names the file the watcher process summarizes; envPID the go
// command it waits for.
const (
	envWatch = "SLUICE_TESTSKIP_WATCH"
	envPID   = "SLUICE_TESTSKIP_PID"
)

func init() {
	if f := os.Getenv(envWatch); f != "" {
		pid, _ := strconv.Atoi(os.Getenv(envPID))
		watch(f, pid, os.Stdout)
		os.Exit(0)
	}
}

// Missing skips t because part is missing here, or fails it when the
// environment variable require (e.g. "SLUICE_KAFKA"; "" for none) is
// "require", as CI sets it: a machine meant to run everything must not
// skip. The skip is counted in the run's summary.
func Missing(t testing.TB, require, part, reason string) {
	t.Helper()
	if require != "" && os.Getenv(require) == "require" {
		t.Fatalf("%s (%s=require)", reason, require)
	}
	note(t.Name(), part, require)
	t.Skip(reason)
}

var watchOnce sync.Once

// note appends "part \t require \t package \t test" to the run's file and
// starts the watcher once per run.
func note(test, part, require string) {
	pid := os.Getppid()
	start, ok := goCommand(pid)
	if !ok {
		return
	}
	base := filepath.Join(os.TempDir(), fmt.Sprintf("sluice-skips-%d-%s", pid, start))
	f, err := os.OpenFile(base, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%s\t%s\t%s\t%s\n", part, require, pkgDir(), test)
	f.Close()
	watchOnce.Do(func() { startWatcher(base, pid) })
}

// goCommand tells whether pid is a go command, and its start time (field
// 22 of /proc/PID/stat), which with the pid names the run.
func goCommand(pid int) (string, bool) {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return "", false
	}
	return startTime(pid)
}

func startTime(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	// The command name (field 2) may hold spaces; it ends at the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", false
	}
	return f[19], true // field 22
}

// pkgDir is the test's package directory relative to the module root (go
// test runs a test binary in its package's directory).
func pkgDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	for d := wd; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			if rel, err := filepath.Rel(d, wd); err == nil {
				return filepath.ToSlash(rel)
			}
			return wd
		}
		up := filepath.Dir(d)
		if up == d {
			return wd
		}
		d = up
	}
}

// startWatcher runs this test binary again as the watcher of base, its
// output the go command's standard error (appending, in case it is a
// file), in a session of its own, with none of this binary's pipes: the
// go command waits for those to close.
func startWatcher(base string, pid int) {
	if _, err := os.OpenFile(base+".watch", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
		return // another test binary of this run started it
	}
	out, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/2", pid), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	defer out.Close()
	exe, err := os.Executable()
	if err != nil {
		return
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envWatch+"="+base, envPID+"="+strconv.Itoa(pid))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cmd.Start() == nil {
		cmd.Process.Release()
	}
}

// watch waits for the go command pid to exit, then writes the summary of
// base to w and removes base's files.
func watch(base string, pid int, w io.Writer) {
	start, ok := startTime(pid)
	for ok {
		time.Sleep(100 * time.Millisecond)
		var now string
		if now, ok = startTime(pid); ok && now != start {
			break // the pid is another process's now
		}
	}
	f, err := os.Open(base)
	if err == nil {
		fmt.Fprint(w, Summary(f))
		f.Close()
	}
	os.Remove(base)
	os.Remove(base + ".watch")
}

// Summary formats the recorded skips (lines of "part \t require \t package
// \t test"): one line per part with the packages, and the command that
// runs everything. Empty when there are none.
func Summary(r io.Reader) string {
	type part struct {
		require string
		tests   map[string]bool
		pkgs    map[string]bool
	}
	parts := map[string]*part{}
	total := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 {
			continue
		}
		p := parts[f[0]]
		if p == nil {
			p = &part{require: f[1], tests: map[string]bool{}, pkgs: map[string]bool{}}
			parts[f[0]] = p
		}
		if p.require == "" {
			p.require = f[1]
		}
		p.tests[f[2]+" "+f[3]] = true
		p.pkgs[f[2]] = true
		total[f[2]+" "+f[3]] = true
	}
	if len(total) == 0 {
		return ""
	}
	names := make([]string, 0, len(parts))
	for n := range parts {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "\nsluice: %d tests skipped, for what this machine lacks (go test -v names them):\n", len(total))
	for _, n := range names {
		p := parts[n]
		pkgs := make([]string, 0, len(p.pkgs))
		for k := range p.pkgs {
			pkgs = append(pkgs, k)
		}
		sort.Strings(pkgs)
		fmt.Fprintf(&b, "  %s: %d (%s)", n, len(p.tests), strings.Join(pkgs, ", "))
		if p.require != "" {
			fmt.Fprintf(&b, "; %s=require fails them instead", p.require)
		}
		b.WriteString("\n")
	}
	b.WriteString("sluice: scripts/test-all.sh installs the parts and runs everything (as root for the tmpfs tests)\n")
	return b.String()
}
