package s3store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// maxCopyPart is the largest part S3 copies in one UploadPartCopy.
const maxCopyPart = 5 << 30

// copyable tells whether partials of these sizes can each be one part of
// the final upload, copied inside the store: S3 takes a part under 5 MiB
// only as the last, and copies at most 5 GiB into one.
func copyable(sizes []int64) bool {
	for i, n := range sizes {
		if n > maxCopyPart || n < minPart && i < len(sizes)-1 || n == 0 {
			return false
		}
	}
	return len(sizes) > 0
}

// copyParts makes partial i part i+1 of u's multipart upload, copied
// inside the store (UploadPartCopy: its bytes do not pass through this
// server), up to partsInFlight at once, while the SHA-256 of all the
// bytes, in order, is taken by reading the partials: the hash Finish
// checks before the upload is completed. u then holds all its bytes.
func (s *Store) copyParts(u *Upload, ids []string, sizes []int64) error {
	etags := make([]*string, len(ids))
	copied := make(chan error, 1)
	go func() { copied <- s.copyAll(u.rec, ids, sizes, etags) }()
	h := sha256.New()
	herr := s.hashAll(h, ids, sizes)
	if err := errors.Join(herr, <-copied); err != nil {
		return err
	}
	u.adopt(h, etags)
	return nil
}

func (s *Store) copyAll(r *record, ids []string, sizes []int64, etags []*string) error {
	key := s.objKey(r)
	slots := make(chan struct{}, partsInFlight)
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			ctx, cancel := context.WithTimeout(context.Background(), s.o.OpTimeout+time.Duration(sizes[i]/feedRate)*time.Second)
			defer cancel()
			src := escapeKey(s.loc.Bucket + "/" + s.partDir() + id)
			out, err := s.c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: &s.loc.Bucket, Key: &key, UploadId: &r.UploadID,
				PartNumber: aws.Int32(int32(i + 1)), CopySource: &src})
			if err != nil {
				errs[i] = classify(fmt.Sprintf("copying partial upload %s into part %d of %s", id, i+1, r.Name), err)
				return
			}
			if out.CopyPartResult == nil || out.CopyPartResult.ETag == nil {
				errs[i] = fmt.Errorf("copying partial upload %s: the store gave no ETag: %w", id, ErrUnreachable)
				return
			}
			etags[i] = out.CopyPartResult.ETag
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// hashAll adds the partials' bytes, in order, to h.
func (s *Store) hashAll(h hash.Hash, ids []string, sizes []int64) error {
	for i, id := range ids {
		if err := s.hashOne(h, id, sizes[i]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) hashOne(h hash.Hash, id string, size int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.OpTimeout+time.Duration(size/feedRate)*time.Second)
	defer cancel()
	key := s.partDir() + id
	out, err := s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.loc.Bucket, Key: &key})
	if err != nil {
		return classify("reading partial upload "+id, err)
	}
	defer out.Body.Close()
	n, err := io.Copy(h, out.Body)
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return fmt.Errorf("reading partial upload %s (%d of %d bytes): %w", id, n, size, err)
	}
	return nil
}

// adopt makes u hold all its bytes as the copied parts etags, whose
// SHA-256 h is.
func (u *Upload) adopt(h hash.Hash, etags []*string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.parts = u.parts[:0]
	for i, e := range etags {
		n := int32(i + 1)
		u.parts = append(u.parts, types.CompletedPart{PartNumber: aws.Int32(n)})
		u.sd.mu.Lock()
		u.sd.sent[n] = e
		u.sd.mu.Unlock()
	}
	u.hash, u.written, u.durable, u.published = h, u.rec.Size, u.rec.Size, len(etags)
}

// escapeKey is bucket/key as CopySource wants it: each path segment
// URL-encoded, the slashes kept.
func escapeKey(k string) string {
	seg := strings.Split(k, "/")
	for i, s := range seg {
		seg[i] = url.PathEscape(s)
	}
	return strings.Join(seg, "/")
}
