package s3store

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// partsInFlight is how many parts of one upload may be on their way to
// the store while the writer fills the next: the store's latency per
// part then overlaps the receiving (the S3 SDK's own uploader sends 5 at
// once). An upload's memory is at most partsInFlight+1 part buffers.
const partsInFlight = 3

// sender uploads an upload's parts in the background, at most
// partsInFlight at once; the writer (under u.mu) launches them in order
// and drains them before it publishes, checkpoints, finishes or lets go.
type sender struct {
	slots chan struct{} // one token per part in flight
	spare chan []byte   // part buffers back from the store
	wg    sync.WaitGroup

	mu   sync.Mutex
	sent map[int32]*string // ETags of the parts the store took
	err  error             // the first part the store refused
}

func newSender() *sender {
	return &sender{slots: make(chan struct{}, partsInFlight), spare: make(chan []byte, partsInFlight+1), sent: map[int32]*string{}}
}

// launch uploads body as part n of u's multipart upload. The part is not
// signed whole (UNSIGNED-PAYLOAD: a SHA-256 pass over every byte less);
// the SDK's checksum of it (CRC32) is what the store checks, and the
// file's SHA-256, verified before the upload is completed, covers it.
func (sd *sender) launch(u *Upload, n int32, body []byte) {
	sd.slots <- struct{}{}
	sd.wg.Add(1)
	go func() {
		defer sd.wg.Done()
		ctx, cancel := u.s.opCtx()
		defer cancel()
		key := u.s.objKey(u.rec)
		out, err := u.s.c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &u.s.loc.Bucket, Key: &key, UploadId: &u.rec.UploadID,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body)))},
			s3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware))
		sd.mu.Lock()
		if err != nil && sd.err == nil {
			sd.err = classify(fmt.Sprintf("sending part %d of %s", n, u.rec.Name), err)
		} else if err == nil {
			sd.sent[n] = out.ETag
		}
		sd.mu.Unlock()
		sd.spare <- body[:0]
		<-sd.slots
	}()
}

// failed is the first refusal so far, without waiting.
func (sd *sender) failed() error {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	return sd.err
}

// drain waits for every part in flight; the first refusal, if any.
func (sd *sender) drain() error {
	sd.wg.Wait()
	return sd.failed()
}

// sentThrough is the highest n such that parts from+1..n are all sent.
func (sd *sender) sentThrough(from int) int {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	for sd.sent[int32(from+1)] != nil {
		from++
	}
	return from
}

func (sd *sender) etag(n int32) *string {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	return sd.sent[n]
}

// forget drops what it knows of parts after n (a rollback to them).
func (sd *sender) forget(n int) {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	for k := range sd.sent {
		if int(k) > n {
			delete(sd.sent, k)
		}
	}
	sd.err = nil
}
