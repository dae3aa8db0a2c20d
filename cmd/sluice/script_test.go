package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScript runs the CLI transcripts in testdata/script: each is a
// sequence of `sluice ...` invocations with the exact output and exit
// status a user sees (issue 24: the first hour's paths stay right). The
// `sluice` in them is this test binary acting as the command (TestMain).
// Run one with -run TestScript/NAME; -testwork keeps its directory.
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Cmds:                map[string]func(ts *testscript.TestScript, neg bool, args []string){"rsocket-serve": rsocketServeCmd},
	})
}

// rsocketServeCmd is the script command `rsocket-serve`: `sluice rsocket
// serve` in this process on a free port until the script ends, its URL in
// $RSOCKET_URL.
func rsocketServeCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) > 0 {
		ts.Fatalf("usage: rsocket-serve")
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- rsocketServe(ctx, []string{"--listen", "tcp://127.0.0.1:0", "--log-level", "error"}, pw, io.Discard)
		pw.Close()
	}()
	ts.Defer(func() {
		cancel()
		<-done
	})
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
			go io.Copy(io.Discard, pr)
			ts.Setenv("RSOCKET_URL", u)
			return
		}
	}
	ts.Fatalf("rsocket serve printed no listening URL: %v", <-done)
}
