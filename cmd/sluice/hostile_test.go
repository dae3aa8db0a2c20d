package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// `sluice hostile` against an HTTP listener with a small header deadline:
// the server closes the silent connections and the command says so on
// stdout; bad invocations exit 2, -h prints help on stdout.
func TestHostileCLI(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 100 * time.Millisecond}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	code, out, errs := run("hostile", "--target", "metrics", "--addr", addr, "--mode", "headers-stall", "--conns", "2", "--duration", "8s")
	if code != 0 || !strings.HasPrefix(out, "metrics headers-stall: 2 connections, 0 failed, 2 closed by the server") {
		t.Fatalf("code %d stdout %q stderr %q", code, out, errs)
	}
	if code, out, _ := run("hostile", "-h"); code != 0 || !strings.Contains(out, "-mode") {
		t.Errorf("-h: code %d stdout %q", code, out)
	}
	for _, tc := range []struct {
		args []string
		errs string
	}{
		{[]string{"--mode", "silent", "--target", "sink"}, "--target, --addr and --mode are required"},
		{[]string{"--addr", addr, "--target", "sink", "--mode", "rude"}, `unknown mode "rude"`},
		{[]string{"--addr", addr, "--target", "nfs", "--mode", "silent"}, `unknown target "nfs"`},
		{[]string{"--addr", addr, "--target", "sink", "--mode", "silent", "--conns", "0"}, "must be positive"},
	} {
		code, _, errs := run(append([]string{"hostile"}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.errs) {
			t.Errorf("%v: code %d stderr %q; want 2 containing %q", tc.args, code, errs, tc.errs)
		}
	}
}
