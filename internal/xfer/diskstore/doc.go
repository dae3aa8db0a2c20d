// Package diskstore is the local-disk store of file transfer uploads, the
// xfer.Backend that `sluice xfer serve` runs on: every upload resumable,
// checksummed and atomic.
//
// A partial upload lives under DIR/.partial/ as two files: ID.part, the
// bytes received so far, and ID.meta, a sidecar with two checksummed slots
// written alternately (offset, size, name, the running SHA-256 state,
// created and updated times). The sidecar's offset only moves after the
// data up to it was fsynced, so after a crash the data file is cut back to
// the sidecar's offset and the upload resumes from there; a torn slot falls
// back to the other one, and a sidecar with no valid slot restarts the
// upload from zero instead of wedging it. A complete upload is verified
// (size, SHA-256), fsynced and renamed to DIR/NAME, then DIR is fsynced:
// DIR/NAME is either absent or whole and verified.
//
// One writer per name: a second upload of a name that is being written is
// refused with xfer.ErrBusy. DIR is locked (internal/dirlock) so that two
// servers never share it.
package diskstore

import "github.com/sluicehq/sluice/internal/xfer"

// The local-disk store is a Backend with every optional capability.
var (
	_ xfer.IDBackend     = (*Uploads)(nil)
	_ xfer.BackendUpload = (*Upload)(nil)
	_ xfer.PieceWriter   = (*Upload)(nil)
)
