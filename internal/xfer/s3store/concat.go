package s3store

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluicehq/sluice/internal/xfer"
)

// Concatenation (tus's extension): each partial upload is a multipart
// upload of its own, sent in parallel by the client, which lands at a
// hidden key (objKey: PREFIX/.sluice/part/ID) with a finished record; the
// final upload is a new multipart upload of the name whose parts are the
// partials, in order: each copied inside the store (UploadPartCopy,
// concatcopy.go) while the server reads them once for the SHA-256 of the
// whole. It is completed as any upload is, only once that hash matches.
// S3 takes a part under 5 MiB only as the last, and copies at most 5 GiB
// into one: partials that do not fit (tus-js-client splits a small file
// into small parts) are fed instead through the ordinary write path (part
// buffer, hash state), their bytes read from the store and written back.

// The S3 store joins partial uploads.
var _ xfer.ConcatBackend = (*Store)(nil)

// BeginPartial starts a partial upload of size bytes (tus Upload-Concat:
// partial), acquired for writing (Release it). Finished, it stays hidden
// until a Concat uses it, or its record expires.
func (s *Store) BeginPartial(size int64, meta string) (xfer.BackendUpload, error) {
	return upload(s.begin(&record{Size: size, Meta: meta, Keep: true, Partial: true}, true))
}

// Concat makes the finished partial uploads ids, in that order, the file
// name (the tus final upload): visible only once the SHA-256 of all its
// bytes matches sha (when not nil). It removes the partials once the file
// is there. xfer.ErrNotFound when a partial is not in the store (never
// made, expired, or used by another Concat), xfer.ErrNotPartial when one is
// not a finished partial upload.
func (s *Store) Concat(name string, sha []byte, meta string, ids []string) (xfer.Info, error) {
	ctx, cancel := s.opCtx()
	defer cancel()
	var size int64
	sizes := make([]int64, len(ids))
	for i, id := range ids {
		f, err := s.finishedRecord(ctx, id)
		if err != nil {
			return xfer.Info{}, err
		}
		if !f.Partial {
			return xfer.Info{}, fmt.Errorf("%w: upload %s", xfer.ErrNotPartial, id)
		}
		size += f.Size
		sizes[i] = f.Size
	}
	u, err := s.begin(&record{Name: name, Size: size, SHA256: sha, Meta: meta, Keep: true, Parts: ids}, true)
	if err != nil {
		return xfer.Info{}, err
	}
	defer u.Release()
	join := s.feed
	if copyable(sizes) {
		join = s.copyParts
	}
	if err := join(u, ids, sizes); err != nil {
		u.Remove()
		return xfer.Info{}, err
	}
	sum, err := u.Finish(nil, "tus-concat")
	if err != nil {
		return xfer.Info{}, err
	}
	dctx, dcancel := s.opCtx() // ctx may be spent: the copy may be long
	defer dcancel()
	for _, id := range ids {
		s.del(dctx, s.partDir()+id)
		s.del(dctx, s.doneKey(id))
	}
	in := u.Info()
	in.Offset, in.SHA256, in.Finished, in.Active = in.Size, sum, true, false
	return in, nil
}

// finishedRecord is the finished record of upload id.
func (s *Store) finishedRecord(ctx context.Context, id string) (*xfer.Finished, error) {
	if !validID(id) {
		return nil, fmt.Errorf("%w: %q", xfer.ErrNotFound, id)
	}
	o, err := s.get(ctx, s.doneKey(id))
	if notFound(err) {
		return nil, fmt.Errorf("%w: upload %s is not finished or not here", xfer.ErrNotPartial, id)
	}
	if err != nil {
		return nil, classify("reading the record of upload "+id, err)
	}
	var f xfer.Finished
	if json.Unmarshal(o.body, &f) != nil || f.ID != id {
		return nil, fmt.Errorf("%w: upload %s", xfer.ErrNotPartial, id)
	}
	return &f, nil
}

// feedRate is the slowest the store is expected to give a partial's
// bytes (1 MiB/s), which bounds how long its read may take.
const feedRate = 1 << 20

// feed writes the partials' objects, in order, into u.
func (s *Store) feed(u *Upload, ids []string, sizes []int64) error {
	for i, id := range ids {
		if err := s.feedOne(u, id, sizes[i]); err != nil {
			return err
		}
	}
	return nil
}

// feedOne writes the partial object id at u's offset. Its deadline is
// OpTimeout plus the time to read the object at feedRate: one request
// that streams a partial of any size.
func (s *Store) feedOne(u *Upload, id string, size int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.OpTimeout+time.Duration(size/feedRate)*time.Second)
	defer cancel()
	key := s.partDir() + id
	out, err := s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.loc.Bucket, Key: &key})
	if notFound(err) {
		return fmt.Errorf("%w: partial upload %s is gone (used by another concatenation, or expired)", xfer.ErrNotFound, id)
	}
	if err != nil {
		return classify("reading partial upload "+id, err)
	}
	defer out.Body.Close()
	off := u.Offset()
	n, err := u.ReadFrom(off, out.Body, nil, nil)
	if err != nil {
		return fmt.Errorf("concatenating partial upload %s: %w", id, err)
	}
	if out.ContentLength != nil && n-off != *out.ContentLength {
		return fmt.Errorf("partial upload %s: read %d of %d bytes: %w", id, n-off, *out.ContentLength, io.ErrUnexpectedEOF)
	}
	return nil
}
