package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/testpki"
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

// produce --agent at an HTTP/2 port (the sink's gRPC listener) says so
// and ends at once: it said "answers HTTP/1.1", printed the raw frame,
// and retried the same answer for --timeout (10 minutes by default;
// found by hand).
func TestProduceAgentIsGRPC(t *testing.T) {
	addr := acceptEach(t, func(c net.Conn) {
		// An HTTP/2 server's first bytes: an empty SETTINGS frame.
		c.Write([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0})
		c.Close()
	})
	in := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(in, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run("produce", "--agent", addr, "--file", in, "--timeout", "10m")
	want := addr + " answers HTTP/2 (a gRPC listener, such as the sink's); --agent takes the agent's --ingest address"
	if code != 1 || out != "" || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errOut, want)
	}
}

// consume --sink at a TLS sink without --tls-ca: the sink drops the
// plain-text client without a word, and the hint says to add --tls-ca
// (before: the bare "error reading server preface: EOF"; found by hand).
func TestConsumePlainTextToTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := testpki.SelfSigned(t, dir)
	addr := freeAddr(t)
	sink := start(t, "sink", "sink", "--listen", addr, "--data", filepath.Join(dir, "data"), "--metrics", freeAddr(t),
		"--tls-cert", certFile, "--tls-key", keyFile)
	listening(t, addr)
	_ = sink
	code, _, errOut := run("consume", "--sink", addr)
	if code != 1 || !strings.Contains(errOut, "if it serves TLS, add --tls-ca") {
		t.Errorf("exit %d, stderr %q; want exit 1 and the --tls-ca hint", code, errOut)
	}
}

// acceptEach listens on loopback and hands every connection to handle
// (on its accept loop) until the test ends; it returns the address.
func acceptEach(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			handle(c)
		}
	}()
	return lis.Addr().String()
}
