// Package kafkash runs scripts/kafka.sh from Go: it finds the script
// (RepoRoot) and starts a broker outside a test (Launch, for `sluice bench
// ingest`). kafkatest starts its test brokers with the same script; this
// package is apart from it so that the sluice binary does not link package
// testing.
package kafkash

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Script returns the path of scripts/kafka.sh, found as kafkatest.Start does,
// for callers outside tests (`sluice bench ingest` runs its tools-env).
func Script() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "scripts", "kafka.sh"), nil
}

// Launch is kafkatest.Start outside a test, for `sluice bench ingest`: a broker in
// a fresh temporary directory, watched by this process (the script stops
// it if the process dies), its progress on progress. stop stops the
// broker and removes its directory.
func Launch(progress io.Writer) (addr string, stop func(), err error) {
	script, err := Script()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "sluice-kafka-")
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintln(progress, "starting Kafka with", script, "(the first run downloads it from Maven Central) ...")
	cmd := exec.Command("bash", script, "start", "--dir", dir, "--watch-pid", strconv.Itoa(os.Getpid()))
	cmd.Stderr = progress
	out, err := cmd.Output()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop = func() {
		exec.Command("bash", script, "stop", "--dir", dir).Run()
		os.RemoveAll(dir)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	addr = strings.TrimSpace(lines[len(lines)-1])
	if _, _, err := net.SplitHostPort(addr); err != nil {
		stop()
		return "", nil, errors.New("scripts/kafka.sh printed no address")
	}
	return addr, stop, nil
}

// RepoRoot finds the module root holding scripts/kafka.sh: up from the
// working directory (go test runs in the package's directory), else up from
// this source file.
func RepoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		if root, ok := FindRoot(dir); ok {
			return root, nil
		}
	}
	return "", fmt.Errorf("no directory with go.mod and scripts/kafka.sh above %q", starts)
}

// FindRoot walks up from dir to the module root holding
// scripts/kafka.sh.
func FindRoot(dir string) (string, bool) {
	for {
		if isFile(filepath.Join(dir, "go.mod")) && isFile(filepath.Join(dir, "scripts", "kafka.sh")) {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
