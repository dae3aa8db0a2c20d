package seglog

import (
	"os"
	"syscall"
)

// datasync uses fdatasync: it skips flushing metadata (such as mtime) that is
// not needed to read the data back, which saves a journal write per sync.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
