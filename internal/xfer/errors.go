package xfer

import (
	"errors"
	"strconv"
)

// Errors a transport maps to its own answers (gRPC code, tus status).
var (
	ErrBadName     = errors.New("bad name")
	ErrBusy        = errors.New("upload already in progress")
	ErrTooLarge    = errors.New("upload larger than the server's maximum")
	ErrNoSpace     = errors.New("not enough free space")
	ErrOffset      = errors.New("offset mismatch")
	ErrChecksum    = errors.New("checksum mismatch")
	ErrNotFound    = errors.New("no such upload")
	ErrOverSize    = errors.New("more data than the declared size")
	ErrIncomplete  = errors.New("upload incomplete")
	ErrClosedStore = errors.New("store closed")
	// ErrNotPartial is a concatenation (ConcatBackend.Concat) of an
	// upload that is not a finished partial upload.
	ErrNotPartial = errors.New("not a finished partial upload")
)

// OffsetError is an append at the wrong offset; Have is the server's.
type OffsetError struct{ Want, Have int64 }

func (e *OffsetError) Error() string {
	return "offset mismatch: chunk at " + strconv.FormatInt(e.Want, 10) + ", server has " + strconv.FormatInt(e.Have, 10)
}
func (e *OffsetError) Is(target error) bool { return target == ErrOffset }

// BusyError names the upload that is being written.
type BusyError struct{ Name string }

func (e *BusyError) Error() string        { return "upload of " + e.Name + " already in progress" }
func (e *BusyError) Is(target error) bool { return target == ErrBusy }
