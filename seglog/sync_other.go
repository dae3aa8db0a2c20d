//go:build !linux

package seglog

import "os"

func datasync(f *os.File) error { return f.Sync() }
