// Package dirlock gives one process exclusive use of a directory.
//
// Two sluice processes writing one spool or one store corrupt each other's
// checksums and lose acknowledged records, so every daemon locks the
// directories it owns at startup. The lock is an flock(2) on DIR/LOCK: the
// kernel drops it when the process dies, even by SIGKILL, so a crash never
// leaves a stale lock behind. The file also holds the owner's pid, which
// only serves the error message: the lock itself is the flock, not the pid.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FileName is the lock file inside a locked directory.
const FileName = "LOCK"

// ErrBusy is wrapped by the error Acquire returns when another process
// holds the lock.
var ErrBusy = errors.New("directory in use")

// BusyError says which process holds a directory.
type BusyError struct {
	What string // "spool", "data", ...
	Dir  string
	PID  int // 0 when the holder's pid could not be read
}

func (e *BusyError) Error() string {
	pid := "unknown"
	if e.PID > 0 {
		pid = strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("%s %s is in use by another sluice process (pid %s)", e.What, e.Dir, pid)
}

func (e *BusyError) Unwrap() error { return ErrBusy }

// Lock is a held directory lock. Release it with Release; process exit
// releases it too.
type Lock struct {
	f *os.File
}

// Acquire creates dir if missing and locks it exclusively without
// waiting. what names the directory's role in the error message
// ("spool", "data"). When another process holds the lock the error is a
// *BusyError.
func Acquire(dir, what string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := tryLock(f); err != nil {
		pid := readPID(f)
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, &BusyError{What: what, Dir: dir, PID: pid}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// The pid is advisory; a failure to write it does not void the lock.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Held reports whether some process (this one included) holds dir's lock.
// Readers that only read use it to warn, never to refuse.
func Held(dir string) (bool, int) {
	f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_RDWR, 0)
	if err != nil {
		return false, 0
	}
	defer f.Close()
	if err := tryLock(f); err != nil {
		return true, readPID(f)
	}
	unlock(f)
	return false, 0
}

// Release drops the lock. The lock file stays: removing it would race
// with a process that has just opened it.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	unlock(l.f)
	err := l.f.Close()
	l.f = nil
	return err
}

func readPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil {
		return 0
	}
	return pid
}
