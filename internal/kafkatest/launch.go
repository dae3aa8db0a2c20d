package kafkatest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// Script returns the path of scripts/kafka.sh, found as Start finds it,
// for callers outside tests (`sluice bench ingest` runs its tools-env).
func Script() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "scripts", "kafka.sh"), nil
}

// Launch is Start outside a test, for `sluice bench ingest`: a broker in
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
	addr = lastLine(string(out))
	if _, _, err := net.SplitHostPort(addr); err != nil {
		stop()
		return "", nil, errors.New("scripts/kafka.sh printed no address")
	}
	return addr, stop, nil
}
