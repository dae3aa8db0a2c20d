package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A daemon whose port is taken says which flag's address, and leaves
// nothing on disk: before issue 24 the agent logged "agent started" and
// created a spool with a new agent id, then failed with "listen tcp
// 127.0.0.1:7401: bind: address already in use".
func TestBindBeforeState(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().String()
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	for _, c := range []struct {
		name, flag string
		args       func(dir string) []string
	}{
		{"agent", "--ingest", func(dir string) []string {
			return []string{"agent", "--sink", free(), "--spool", dir, "--ingest", busy}
		}},
		{"agent", "--metrics", func(dir string) []string {
			return []string{"agent", "--sink", free(), "--spool", dir, "--ingest", "127.0.0.1:0", "--metrics", busy}
		}},
		{"agent", "--otlp-grpc", func(dir string) []string {
			return []string{"agent", "--sink", free(), "--spool", dir, "--ingest", "127.0.0.1:0", "--otlp-grpc", busy}
		}},
		{"sink", "--listen", func(dir string) []string { return []string{"sink", "--data", dir, "--listen", busy} }},
		{"sink", "--metrics", func(dir string) []string {
			return []string{"sink", "--data", dir, "--listen", "127.0.0.1:0", "--metrics", busy}
		}},
		{"sink", "--listen-rsocket", func(dir string) []string {
			return []string{"sink", "--data", dir, "--listen", "127.0.0.1:0", "--listen-rsocket", "tcp://" + busy}
		}},
		{"xfer serve", "--tus", func(dir string) []string { return []string{"xfer", "serve", "--dir", dir, "--tus", busy} }},
		{"xfer serve", "--grpc", func(dir string) []string { return []string{"xfer", "serve", "--dir", dir, "--grpc", busy} }},
	} {
		dir := filepath.Join(t.TempDir(), "state")
		code, _, errOut := run(c.args(dir)...)
		want := c.flag + " " + busy + ": address already in use"
		if code != 1 || !strings.Contains(errOut, want) || strings.Contains(errOut, "agent started") {
			t.Errorf("%s with %s taken: exit %d, stderr:\n%s\nwant exit 1 and %q", c.name, c.flag, code, errOut, want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s with %s taken created %s (%v)", c.name, c.flag, dir, err)
		}
	}
}
