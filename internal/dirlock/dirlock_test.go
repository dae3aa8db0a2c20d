package dirlock

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestSecondAcquireFails(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, "spool")
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to the open file description, so a second open in
	// the same process conflicts just like another process would.
	_, err = Acquire(dir, "spool")
	var be *BusyError
	if !errors.As(err, &be) || !errors.Is(err, ErrBusy) {
		t.Fatalf("second Acquire: %v, want BusyError", err)
	}
	want := fmt.Sprintf("spool %s is in use by another sluice process (pid %d)", dir, os.Getpid())
	if err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	if held, pid := Held(dir); !held || pid != os.Getpid() {
		t.Fatalf("Held = %v, %d", held, pid)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if held, _ := Held(dir); held {
		t.Fatal("still held after Release")
	}
	l2, err := Acquire(dir, "spool")
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
}

// TestHelperHold is the child process of TestOtherProcess.
func TestHelperHold(t *testing.T) {
	dir := os.Getenv("DIRLOCK_HOLD")
	if dir == "" {
		t.Skip("helper process")
	}
	if _, err := Acquire(dir, "data"); err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println("LOCKED")
	os.Stdout.Sync()
	select {} // held until killed
}

func TestOtherProcessAndKill(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHold$")
	cmd.Env = append(os.Environ(), "DIRLOCK_HOLD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := out.Read(buf)
	if !strings.Contains(string(buf[:n]), "LOCKED") {
		cmd.Process.Kill()
		t.Fatalf("child: %q", buf[:n])
	}
	_, err = Acquire(dir, "data")
	want := fmt.Sprintf("data %s is in use by another sluice process (pid %d)", dir, cmd.Process.Pid)
	if err == nil || err.Error() != want {
		cmd.Process.Kill()
		t.Fatalf("got %v, want %q", err, want)
	}
	// SIGKILL: the kernel releases the flock; no stale lock remains.
	cmd.Process.Kill()
	cmd.Wait()
	l, err := Acquire(dir, "data")
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	l.Release()
}
