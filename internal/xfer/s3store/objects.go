package s3store

import (
	"bytes"
	"context"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// The small objects beside the parts (info, hash states, tail, lease,
// name pointers, finished records) are read and written whole.

// maxStateObject bounds what get reads: a tail is at most a part, the
// others a few hundred bytes.
const maxStateObject = 1 << 30

// object is a small object as get read it.
type object struct {
	body     []byte
	etag     string
	modified time.Time
}

// get reads key whole; a missing key is an error notFound tells.
func (s *Store) get(ctx context.Context, key string) (*object, error) {
	out, err := s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.loc.Bucket, Key: &key})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, maxStateObject))
	if err != nil {
		return nil, err
	}
	o := &object{body: b, etag: aws.ToString(out.ETag)}
	if out.LastModified != nil {
		o.modified = *out.LastModified
	}
	return o, nil
}

// cond is a conditional write: ifMatch the ETag the object must still
// have, or ifAbsent that it must not exist (S3 answers 412 otherwise).
type cond struct {
	ifMatch  string
	ifAbsent bool
}

// put writes key whole and returns its new ETag.
func (s *Store) put(ctx context.Context, key string, body []byte, c cond) (string, error) {
	in := &s3.PutObjectInput{Bucket: &s.loc.Bucket, Key: &key, Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body)))}
	if c.ifMatch != "" {
		in.IfMatch = aws.String(c.ifMatch)
	}
	if c.ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	out, err := s.c.PutObject(ctx, in)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

func (s *Store) del(ctx context.Context, key string) error {
	_, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.loc.Bucket, Key: &key})
	return err
}

// list calls f for every object under prefix.
func (s *Store) list(ctx context.Context, prefix string, f func(types.Object)) error {
	p := s3.NewListObjectsV2Paginator(s.c, &s3.ListObjectsV2Input{Bucket: &s.loc.Bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, o := range page.Contents {
			f(o)
		}
	}
	return nil
}

// delAll deletes every object under prefix (one upload's state).
func (s *Store) delAll(ctx context.Context, prefix string) error {
	var keys []string
	if err := s.list(ctx, prefix, func(o types.Object) { keys = append(keys, aws.ToString(o.Key)) }); err != nil {
		return err
	}
	for _, k := range keys {
		if err := s.del(ctx, k); err != nil && !notFound(err) {
			return err
		}
	}
	return nil
}

// parts lists the parts S3 has of the multipart upload of r, in order.
func (s *Store) parts(ctx context.Context, r *record) ([]types.Part, error) {
	key := s.objKey(r)
	var out []types.Part
	p := s3.NewListPartsPaginator(s.c, &s3.ListPartsInput{Bucket: &s.loc.Bucket, Key: &key, UploadId: &r.UploadID})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Parts...)
	}
	return out, nil
}
