package netem

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// fineTimer sleeps on a timerfd read through the runtime's poller: the
// kernel fires it with high resolution and it wakes epoll_wait at once,
// whereas the runtime's own timers wait in epoll_wait with a millisecond
// timeout. The zero value is ready to use; the timerfd is made on first use.
type fineTimer struct {
	f      *os.File
	rc     syscall.RawConn
	broken bool
}

type itimerspec struct {
	interval, value syscall.Timespec
}

const clockMonotonic = 1

// sleep sleeps for d (> 0) and reports true, or reports false at once if no
// timerfd can be had.
func (ft *fineTimer) sleep(d time.Duration) bool {
	if ft.broken {
		return false
	}
	if ft.f == nil {
		fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic,
			syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if errno != 0 {
			ft.broken = true
			return false
		}
		ft.f = os.NewFile(fd, "netem-timerfd")
		rc, err := ft.f.SyscallConn()
		if err != nil {
			ft.fail()
			return false
		}
		ft.rc = rc
	}
	spec := itimerspec{value: syscall.NsecToTimespec(int64(max(d, 1)))}
	var errno syscall.Errno
	err := ft.rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, fd, 0,
			uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
	})
	if err != nil || errno != 0 {
		ft.fail()
		return false
	}
	var buf [8]byte
	if _, err := ft.f.Read(buf[:]); err != nil {
		ft.fail()
		return false
	}
	return true
}

func (ft *fineTimer) fail() {
	ft.close()
	ft.broken = true
}

func (ft *fineTimer) close() {
	if ft.f != nil {
		ft.f.Close()
		ft.f = nil
	}
}
