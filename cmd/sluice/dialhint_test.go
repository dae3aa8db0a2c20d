package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A dial that nothing answers says which server should be there (issue
// 24: the raw gRPC or transport text only).
func TestDialHintRefused(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	in := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(in, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"consume", "--sink", addr}, "connection refused\" (is the sink running at " + addr + "?)"},
		{[]string{"produce", "--agent", addr, "--timeout", "10ms", "--file", in}, "connection refused (--timeout) (is the agent running at " + addr + "?)"},
		{[]string{"rsocket", "rr", "--url", "tcp://" + addr}, "(is the server running at tcp://" + addr + "?)"},
	} {
		code, out, errOut := run(c.args...)
		if code != 1 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("sluice %q: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.args, code, out, errOut, c.want)
		}
	}
}

// consume --sink at an HTTP/1.1 port (the agent's ingest) says so, not
// "http2: frame too large, note that the frame header looked like an
// HTTP/1.1 header".
func TestConsumeSinkIsHTTP(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler()}
	go srv.Serve(lis)
	defer srv.Close()
	addr := lis.Addr().String()
	code, out, errOut := run("consume", "--sink", addr)
	want := addr + " answers HTTP/1.1; --sink takes the sink's --listen address"
	if code != 1 || out != "" || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errOut, want)
	}
}
