package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `xfer send --sha256`: the right hash lands the file; a wrong one is
// refused once, clearly, and nothing lands; a malformed one is a usage
// error before anything is sent.
func TestXferSendGivenSHA256(t *testing.T) {
	dir := t.TempDir()
	s := startXferServer(t, dir)
	src, sum := xferSource(t, 1<<20+3)
	wrong := "0" + sum[1:]
	if sum[0] == '0' {
		wrong = "1" + sum[1:]
	}
	for _, tr := range xferTransports {
		name := "given-" + tr
		cmd, out, errb := sendCmd(t, t.TempDir(), src, "--to", s.url(tr), "--name", name, "--sha256", sum)
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", tr, err, errb)
		}
		checkXferLanded(t, dir, name, src, sum, out.String())
		bad := "wrong-" + tr
		cmd, out, errb = sendCmd(t, t.TempDir(), src, "--to", s.url(tr), "--name", bad, "--sha256", wrong)
		if err := cmd.Run(); err == nil || !strings.Contains(errb.String(), "--sha256 or Options.SHA256, is not that of what was sent") || out.Len() != 0 {
			t.Fatalf("%s: wrong hash: err %v, stderr %q, stdout %q", tr, err, errb, out)
		}
		if _, err := os.Stat(filepath.Join(dir, bad)); !os.IsNotExist(err) {
			t.Fatalf("%s: the file sent with a wrong hash landed (%v)", tr, err)
		}
	}
	cmd, _, errb := sendCmd(t, t.TempDir(), src, "--to", s.url("grpc"), "--sha256", "zz")
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 2 || !strings.Contains(errb.String(), "want 64 hex digits") {
		t.Fatalf("--sha256 zz: err %v, stderr %q", err, errb)
	}
}
