package peers

import (
	"io"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/syncbuf"
)

// Process is a peer started by Start.
type Process struct {
	// Stdout is the process's standard output.
	Stdout io.Reader
	stderr syncbuf.Buffer
}

// Stderr is what the process wrote on its standard error so far.
func (p *Process) Stderr() string { return p.stderr.String() }

// Start starts cmd with its stdout piped (Process.Stdout) and its stderr
// kept, and ends it when the test ends, logging its stderr if the test
// failed. With graceful, the end is closing its stdin (the peer exits when
// it reads EOF), then a kill after 10 s; otherwise a kill.
func Start(t testing.TB, cmd *exec.Cmd, graceful bool) *Process {
	t.Helper()
	p := &Process{}
	cmd.Stderr = &p.stderr
	var stdin io.Closer
	if graceful {
		w, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdin = w
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if stdin != nil {
			_ = stdin.Close()
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		} else {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", filepath.Base(cmd.Path), p.Stderr())
		}
	})
	return p
}
