package main

import (
	"bufio"
	"context"
	"crypto/x509"
	"io"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/testpki"
)

// TestRSocketCLITLS: `sluice rsocket serve` on tls:// and wss:// with
// mutual TLS, and the client commands over both; a client trusting another
// CA is refused with the verification error.
func TestRSocketCLITLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := testpki.NewCA(t), testpki.NewCA(t)
	srvCert, srvKey := testpki.WritePEM(t, dir, "server", ca.Issue(t, "localhost", x509.ExtKeyUsageServerAuth))
	cliCert, cliKey := testpki.WritePEM(t, dir, "client", ca.Issue(t, "client", x509.ExtKeyUsageClientAuth))
	caFile := ca.WriteCA(t, dir)
	otherDir := t.TempDir()
	otherCA := other.WriteCA(t, otherDir)

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	args := []string{"--listen", "tls://127.0.0.1:0", "--listen", "wss://127.0.0.1:0/rsocket", "--log-level", "error",
		"--tls-cert", srvCert, "--tls-key", srvKey, "--tls-client-ca", caFile}
	go func() { done <- rsocketServe(ctx, args, pw, io.Discard); pw.Close() }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	var urls []string
	sc := bufio.NewScanner(pr)
	for len(urls) < 2 && sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
			urls = append(urls, u)
		}
	}
	if len(urls) < 2 {
		t.Fatal("serve printed no listening URLs")
	}
	go io.Copy(io.Discard, pr)

	for _, u := range urls {
		code, out, errs := run("rsocket", "rr", "--url", u, "--data", "secure", "--tls-ca", caFile, "--tls-cert", cliCert, "--tls-key", cliKey)
		if code != 0 || out != "secure\n" {
			t.Errorf("%s rr: code %d stdout %q stderr %q", u, code, out, errs)
		}
		code, out, errs = run("rsocket", "stream", "--url", u, "--data", "3", "--tls-ca", caFile, "--tls-cert", cliCert, "--tls-key", cliKey, "--tls-server-name", "localhost")
		if code != 0 || out != "0\n1\n2\n" {
			t.Errorf("%s stream: code %d stdout %q stderr %q", u, code, out, errs)
		}
		code, _, errs = run("rsocket", "rr", "--url", u, "--data", "x", "--tls-ca", otherCA, "--tls-cert", cliCert, "--tls-key", cliKey)
		if code == 0 || !strings.Contains(errs, "certificate signed by unknown authority") {
			t.Errorf("%s with the wrong CA: code %d stderr %q", u, code, errs)
		}
	}
	if code, _, errs := run("rsocket", "serve", "--listen", "tls://127.0.0.1:0"); code != 2 || !strings.Contains(errs, "needs --tls-cert and --tls-key") {
		t.Errorf("tls listener without a certificate: code %d stderr %q", code, errs)
	}
}
