package main

import (
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
	})
}
