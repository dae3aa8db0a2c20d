// Package s3store is the S3 object-store store of file transfer uploads,
// the xfer.Backend of `sluice xfer serve --store s3://BUCKET[/PREFIX]`:
// every upload resumable from any server on the same bucket, checksummed,
// and invisible until verified.
//
// An upload is one S3 multipart upload of the final key PREFIX/NAME,
// which S3 shows to nobody until it is completed. Its bytes are gathered
// in a part buffer (Options.PartSize, 8 MiB by default) and each full part
// is uploaded as it fills, numbered in file order, up to partsInFlight at
// once (an upload's memory: at most partsInFlight+1 buffers); beside the
// parts, small objects under PREFIX/.sluice/up/ID/ keep what S3 cannot
// give back:
//
//	info       name, size, expected SHA-256, metadata, the S3 upload id (JSON, written once)
//	hash-N     the SHA-256 state (encoding.BinaryMarshaler) after part N
//	tail       bytes after the last part, with the hash state after them
//	           (a checkpoint between part boundaries: a tus PATCH that ends mid-part)
//	lease      which server writes the upload now, and until when
//
// The resume offset comes from the store: the parts S3 lists (ListParts),
// cut back to the last part whose hash-N exists (a server killed between
// the part and its hash state sends that part again), plus the tail when it
// follows that part. No server keeps anything an upload needs in memory
// between two writers, so any server resumes any upload.
//
// Finish completes the multipart upload only after the SHA-256 of all
// bytes matches the expected one; a mismatch aborts it. One writer at a
// time: a lease object taken and renewed with conditional writes (If-Match,
// If-None-Match), so of two servers writing one upload at once one wins
// and the other is told (xfer.ErrBusy). docs/xfer.md describes it.
package s3store

import "github.com/sluicehq/sluice/internal/xfer"

// The S3 store addresses uploads by id and keeps finished ones' records,
// as tus needs.
var (
	_ xfer.IDBackend     = (*Store)(nil)
	_ xfer.BackendUpload = (*Upload)(nil)
)
