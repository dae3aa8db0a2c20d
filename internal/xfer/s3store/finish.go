package s3store

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sluicehq/sluice/internal/xfer"
)

// Finish completes the upload: all Size bytes must be in the store, and
// their SHA-256 must match the one given at Begin and clientSHA (each when
// not nil); only then is the multipart upload completed, and the object
// PREFIX/NAME appears whole. A mismatch aborts the multipart upload (no
// byte of it can be trusted) and nothing appears. It returns the SHA-256.
func (u *Upload) Finish(clientSHA []byte, via string) ([]byte, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done || !u.loaded {
		return nil, xfer.ErrNotFound
	}
	if u.written != u.rec.Size {
		return nil, fmt.Errorf("%w: %d of %d bytes", xfer.ErrIncomplete, u.written, u.rec.Size)
	}
	if err := u.sd.drain(); err != nil {
		u.rollback()
		return nil, err
	}
	ctx, cancel := u.s.opCtx()
	defer cancel()
	sum := u.hash.Sum(nil)
	for _, want := range [][]byte{u.rec.SHA256, clientSHA} {
		if want != nil && !bytes.Equal(want, sum) {
			u.s.Stats.UploadsFailed.Add(1)
			u.removeLocked(ctx)
			return nil, fmt.Errorf("%w: SHA-256 of %s is %s, the client's is %s; the upload was aborted",
				xfer.ErrChecksum, u.rec.Name, hex.EncodeToString(sum), hex.EncodeToString(want))
		}
	}
	// Still ours: of two servers finishing one upload, one completes it.
	if err := u.renew(ctx); err != nil {
		return nil, err
	}
	if err := u.complete(ctx); err != nil {
		return nil, err
	}
	if u.rec.Keep {
		f := xfer.Finished{ID: u.rec.ID, Name: u.rec.Name, Size: u.rec.Size, Meta: u.rec.Meta, SHA256: sum,
			Created: u.rec.Created, Finished: u.s.o.Now().UTC(), Partial: u.rec.Partial, Parts: u.rec.Parts}
		b, _ := json.Marshal(f)
		if _, err := u.s.put(ctx, u.s.doneKey(u.rec.ID), b, cond{}); err != nil {
			u.s.log.Warn("keeping a finished upload's record failed; a client asking for it will find it gone", "name", u.rec.Name, "id", u.rec.ID, "err", err)
		}
	}
	u.forget(ctx)
	u.done = true
	u.s.Stats.UploadsCompleted.Add(1)
	u.s.log.Info("file landed", "name", u.rec.Name, "size", u.rec.Size, "sha256", hex.EncodeToString(sum),
		"via", via, "store", "s3", "parts", len(u.parts), "duration", u.s.o.Now().Sub(u.rec.Created).Round(time.Millisecond))
	return sum, nil
}

// complete makes the object visible: CompleteMultipartUpload of the
// parts (an empty file, which has none, is put whole instead).
func (u *Upload) complete(ctx context.Context) error {
	key := u.s.objKey(u.rec)
	if u.rec.Size == 0 {
		if _, err := u.s.put(ctx, key, nil, cond{}); err != nil {
			return classify("writing "+u.rec.Name, err)
		}
		u.s.abort(ctx, u.rec)
		return nil
	}
	for i := range u.parts {
		u.parts[i].ETag = u.sd.etag(*u.parts[i].PartNumber)
	}
	_, err := u.s.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &u.s.loc.Bucket, Key: &key,
		UploadId: &u.rec.UploadID, MultipartUpload: &types.CompletedMultipartUpload{Parts: u.parts}})
	if notFound(err) {
		return fmt.Errorf("%w (the multipart upload is gone: completed or aborted by another server)", &xfer.BusyError{Name: u.rec.Name})
	}
	if err != nil {
		return classify("completing the multipart upload of "+u.rec.Name, err)
	}
	return nil
}

// forget removes the upload's state objects and its name's pointer to it.
// What a failure leaves, load removes once it finds the multipart upload
// gone, and expiry after that.
func (u *Upload) forget(ctx context.Context) {
	s := u.s
	if o, err := s.get(ctx, s.nameKey(u.rec.Name)); err == nil && string(o.body) == u.rec.ID {
		s.del(ctx, s.nameKey(u.rec.Name))
	}
	if err := s.delAll(ctx, s.upDir(u.rec.ID)); err != nil {
		s.log.Warn("removing an upload's state objects failed; expiry removes them", "name", u.rec.Name, "id", u.rec.ID, "err", err)
	}
}

// Remove terminates the upload: the multipart upload is aborted and its
// state removed.
func (u *Upload) Remove() {
	u.mu.Lock()
	defer u.mu.Unlock()
	ctx, cancel := u.s.opCtx()
	defer cancel()
	u.removeLocked(ctx)
}

func (u *Upload) removeLocked(ctx context.Context) {
	if err := u.s.abort(ctx, u.rec); err != nil {
		u.s.log.Warn("aborting a multipart upload failed; expiry aborts it", "name", u.rec.Name, "id", u.rec.ID, "err", err)
	}
	u.forget(ctx)
	u.done = true
	u.freeBuf()
}

// OnTakeover sets how to stop this writer when a newer request of this
// Store wants the upload (Acquire).
func (u *Upload) OnTakeover(f func()) {
	u.s.mu.Lock()
	u.interrupt = f
	u.s.mu.Unlock()
}

// Release ends this writer's hold: its progress saved (the tail), the
// lease given back, the part buffer freed.
func (u *Upload) Release() {
	u.mu.Lock()
	if err := u.checkpointLocked(); err != nil {
		u.s.log.Warn("saving a partial upload's progress failed", "name", u.rec.Name, "err", err)
	}
	if !u.done && u.lost == nil && u.leaseTag != "" {
		ctx, cancel := u.s.opCtx()
		// Expired at once, by its ETag: the next writer, on any server,
		// takes it without waiting.
		if err := u.writeLease(ctx, cond{ifMatch: u.leaseTag}, time.Time{}); err != nil {
			u.s.log.Warn("giving back an upload's lease failed; it ends by itself", "name", u.rec.Name, "err", err, "ttl", u.s.o.LeaseTTL)
		}
		cancel()
	}
	u.freeBuf()
	u.loaded = false
	u.mu.Unlock()
	u.s.mu.Lock()
	u.active, u.interrupt = false, nil
	close(u.released)
	if u.s.held[u.rec.ID] == u {
		delete(u.s.held, u.rec.ID)
	}
	u.s.mu.Unlock()
}
