package s3store

import (
	"context"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sluicehq/sluice/internal/xfer"
)

// Expire aborts the multipart uploads idle since before now-Expire that
// no writer holds (their state removed with them), the multipart uploads
// under the prefix that no upload's state names (a server stopped between
// creating one and recording it), and the records of finished uploads
// older than that; it returns how many. Any server of the location may
// run it: what it removes, no writer holds.
func (s *Store) Expire(now time.Time) int {
	if s.o.Expire <= 0 {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*s.o.OpTimeout)
	defer cancel()
	cutoff := now.Add(-s.o.Expire)
	newest := map[string]time.Time{}
	up := s.loc.Prefix + stateDir + "up/"
	err := s.list(ctx, up, func(o types.Object) {
		id, _, _ := strings.Cut(strings.TrimPrefix(aws.ToString(o.Key), up), "/")
		newest[id] = later(newest[id], aws.ToTime(o.LastModified))
	})
	if err != nil {
		s.log.Warn("listing uploads to expire failed", "err", err)
		return 0
	}
	n := 0
	named := map[string]bool{} // the S3 upload ids of the uploads kept
	for id, t := range newest {
		o, err := s.get(ctx, s.infoKey(id))
		var rec *record
		if err == nil {
			rec, _ = decodeRecord(o.body)
		}
		if !t.Before(cutoff) {
			if rec != nil {
				named[rec.UploadID] = true
			}
			continue
		}
		if s.expireOne(ctx, id, rec, now) {
			n++
		} else if rec != nil {
			named[rec.UploadID] = true
		}
	}
	n += s.abortUnnamed(ctx, named, cutoff)
	// Finished records, and the finished partial uploads (concatenation)
	// no final upload used.
	var old []string
	for _, dir := range []string{s.loc.Prefix + stateDir + "done/", s.partDir()} {
		s.list(ctx, dir, func(o types.Object) {
			if aws.ToTime(o.LastModified).Before(cutoff) {
				old = append(old, aws.ToString(o.Key))
			}
		})
	}
	for _, k := range old {
		if s.del(ctx, k) == nil {
			n++
		}
	}
	s.Stats.Expired.Add(int64(n))
	return n
}

// expireOne removes the idle upload id unless a writer holds it.
func (s *Store) expireOne(ctx context.Context, id string, rec *record, now time.Time) bool {
	s.mu.Lock()
	held := s.held[id] != nil
	s.mu.Unlock()
	if held {
		return false
	}
	if l, _, err := s.readLease(ctx, id); err != nil || l != nil && l.Until.After(now) {
		return false
	}
	if rec != nil {
		if err := s.abort(ctx, rec); err != nil {
			s.log.Warn("aborting an expired multipart upload failed", "name", rec.Name, "err", err)
			return false
		}
		if o, err := s.get(ctx, s.nameKey(rec.Name)); err == nil && string(o.body) == id {
			s.del(ctx, s.nameKey(rec.Name))
		}
		s.log.Info("partial upload expired; its multipart upload aborted", "name", rec.Name, "id", id)
	}
	return s.delAll(ctx, s.upDir(id)) == nil
}

// abortUnnamed aborts the multipart uploads under the prefix begun
// before cutoff that no upload's state names.
func (s *Store) abortUnnamed(ctx context.Context, named map[string]bool, cutoff time.Time) int {
	n := 0
	p := s3.NewListMultipartUploadsPaginator(s.c, &s3.ListMultipartUploadsInput{Bucket: &s.loc.Bucket, Prefix: aws.String(s.loc.Prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return n
		}
		for _, m := range page.Uploads {
			if named[aws.ToString(m.UploadId)] || !aws.ToTime(m.Initiated).Before(cutoff) {
				continue
			}
			if _, err := s.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.loc.Bucket, Key: m.Key, UploadId: m.UploadId}); err == nil {
				s.log.Info("a multipart upload no upload names expired; aborted", "key", aws.ToString(m.Key))
				n++
			}
		}
	}
	return n
}

func (s *Store) expireLoop() {
	xfer.RunExpiry(s.o.Expire, s.stopExp, func() { s.Expire(s.o.Now()) })
}
