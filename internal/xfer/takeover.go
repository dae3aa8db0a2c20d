package xfer

import (
	"context"
	"time"
)

// TakeoverWait bounds how long a store's Acquire waits for the writer it
// interrupted to let go of the upload.
const TakeoverWait = 10 * time.Second

// AwaitRelease waits, after a store interrupted an upload's writer, until
// released is closed; a *BusyError for name if that takes longer than
// TakeoverWait or ctx ends first.
func AwaitRelease(ctx context.Context, released <-chan struct{}, name string) error {
	t := time.NewTimer(TakeoverWait)
	defer t.Stop()
	select {
	case <-released:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	return &BusyError{Name: name}
}
