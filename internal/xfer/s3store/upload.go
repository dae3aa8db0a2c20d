package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sluicehq/sluice/internal/xfer"
)

// Upload is one upload held by its writer, from Begin or Acquire until
// Release. Its bytes go to the store a part at a time; between two writers
// nothing of it stays in memory.
type Upload struct {
	s     *Store
	rec   *record
	owner string // this writer's lease owner
	// Guarded by s.mu: active until Release; released is closed then;
	// interrupt, if the writer set one, asks it to stop.
	active    bool
	released  chan struct{}
	interrupt func()

	mu       sync.Mutex
	leaseTag string    // the lease object's ETag as we last wrote it
	leaseAt  time.Time // when we last wrote it
	lost     error     // the lease went to another writer: every write fails with it
	loaded   bool      // restore ran: the fields below describe the upload
	parts    []types.CompletedPart
	hash     hash.Hash // SHA-256 of [0, written)
	buf      []byte    // the bytes after the parts, at most a part
	written  int64     // len(parts)*PartSize + len(buf)
	// durable is the offset the store holds: the parts whose hash state is
	// published plus the tail object; published how many parts that is.
	durable   int64
	published int
	// hashes are the hash states after the parts not yet published.
	hashes  map[int32][]byte
	sd      *sender
	updated time.Time
	done    bool
}

// restore sets u from the store's state of the upload.
func (u *Upload) restore(st *state) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.parts, u.published = st.parts, len(st.parts)
	u.hashes, u.sd = map[int32][]byte{}, newSender()
	for _, p := range st.parts {
		u.sd.sent[aws.ToInt32(p.PartNumber)] = p.ETag
	}
	h := sha256.New()
	if st.hash != nil {
		h, _ = restoreHash(st.hash) // load checked it
	}
	if st.tail != nil {
		h, _ = restoreHash(st.tailHash)
	}
	u.hash = h
	u.buf = append(u.newBuf(), st.tail...)
	u.written, u.durable, u.updated = st.offset, st.offset, st.updated
	u.loaded = true
}

func (u *Upload) ready() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.loaded
}

// Info describes the upload; its Offset is the durable offset.
func (u *Upload) Info() xfer.Info {
	u.mu.Lock()
	defer u.mu.Unlock()
	st := state{rec: u.rec, offset: u.durable, updated: u.updated}
	in := st.info(u.s.o.Expire)
	in.Active = !u.done
	return in
}

// Offset is the next byte the writer must send.
func (u *Upload) Offset() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.written
}

// ---------------------------------------------------------------- lease

// takeLease makes this writer the upload's only one: a lease object
// written if absent, or over an expired one (or one this Store left), by
// its ETag; a live lease of another writer, or losing the race for an
// expired one, is a *xfer.BusyError.
func (u *Upload) takeLease(ctx context.Context) error {
	s := u.s
	l, tag, err := s.readLease(ctx, u.rec.ID)
	if err != nil {
		return classify("reading the upload's lease", err)
	}
	c := cond{ifAbsent: true}
	if l != nil {
		mine := strings.HasPrefix(l.Owner, s.server+"/")
		if !mine && l.Until.After(s.o.Now()) {
			return fmt.Errorf("%w (another server holds it until %s)", &xfer.BusyError{Name: u.rec.Name}, l.Until.Format(time.RFC3339))
		}
		c = cond{ifMatch: tag}
	}
	return u.writeLease(ctx, c, s.o.Now().Add(s.o.LeaseTTL))
}

func (u *Upload) writeLease(ctx context.Context, c cond, until time.Time) error {
	b, _ := json.Marshal(lease{Owner: u.owner, Until: until})
	tag, err := u.s.put(ctx, u.s.leaseKey(u.rec.ID), b, c)
	if preconditionFailed(err) {
		return fmt.Errorf("%w (another server took it)", &xfer.BusyError{Name: u.rec.Name})
	}
	if err != nil {
		return classify("writing the upload's lease", err)
	}
	u.leaseTag, u.leaseAt = tag, u.s.o.Now()
	return nil
}

// renew extends the lease, if it is still ours, before the writer changes
// the upload in the store; once lost, the writer is told and stops.
// Caller holds u.mu.
func (u *Upload) renew(ctx context.Context) error {
	if u.lost != nil {
		return u.lost
	}
	err := u.writeLease(ctx, cond{ifMatch: u.leaseTag}, u.s.o.Now().Add(u.s.o.LeaseTTL))
	if err != nil && xfer.CodeOf(err) == xfer.CodeBusy {
		u.s.log.Warn("another server took over an upload this one was writing; this writer stops", "name", u.rec.Name, "id", u.rec.ID)
		u.lost = err
	}
	return err
}

// renewIfDue renews a lease a third through its life, so that a slow
// writer between two parts keeps it.
func (u *Upload) renewIfDue(ctx context.Context) error {
	if u.s.o.Now().Sub(u.leaseAt) < u.s.o.LeaseTTL/3 {
		return u.lost
	}
	return u.renew(ctx)
}

// ---------------------------------------------------------------- writing

// Write appends one chunk at off whose CRC32C is crc; a full part goes to
// the store before Write returns. It returns the new offset.
func (u *Upload) Write(off int64, p []byte, crc uint32) (int64, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := u.check(off, int64(len(p))); err != nil {
		return u.written, err
	}
	if err := xfer.VerifyChunk(&u.s.Stats, off, p, crc); err != nil {
		return u.written, err
	}
	ctx, cancel := u.s.opCtx()
	defer cancel()
	if err := u.renewIfDue(ctx); err != nil {
		return u.written, err
	}
	if err := u.append(ctx, p, true); err != nil {
		return u.written, err
	}
	return u.written, nil
}

func (u *Upload) check(off, n int64) error {
	if u.done || !u.loaded {
		return xfer.ErrNotFound
	}
	if u.lost != nil {
		return u.lost
	}
	if off != u.written {
		return &xfer.OffsetError{Want: off, Have: u.written}
	}
	if u.written+n > u.rec.Size {
		return fmt.Errorf("%w: %d bytes at offset %d, the size is %d", xfer.ErrOverSize, n, off, u.rec.Size)
	}
	return nil
}

// append adds p after written; each part it fills (or the file's last)
// goes to the store, and with publish its hash state too. A failed part
// returns the upload to its durable offset.
func (u *Upload) append(ctx context.Context, p []byte, publish bool) error {
	u.s.Stats.BytesReceived.Add(int64(len(p)))
	for len(p) > 0 {
		n := copy(u.buf[len(u.buf):u.rec.PartSize], p)
		u.buf = u.buf[:len(u.buf)+n]
		u.hash.Write(p[:n])
		u.written += int64(n)
		p = p[n:]
		if int64(len(u.buf)) == u.rec.PartSize || u.written == u.rec.Size {
			if err := u.sendPart(ctx, publish); err != nil {
				u.rollback()
				return err
			}
		}
	}
	return nil
}

// sendPart hands buf to the sender as the next part and goes on with
// another buffer; with publish, the parts the store took so far are
// published (their hash state put), without waiting for the others.
func (u *Upload) sendPart(ctx context.Context, publish bool) error {
	if err := u.sd.failed(); err != nil {
		return err
	}
	if err := u.renew(ctx); err != nil {
		return err
	}
	n := int32(len(u.parts) + 1)
	u.parts = append(u.parts, types.CompletedPart{PartNumber: aws.Int32(n)})
	u.hashes[n] = marshalHash(u.hash)
	u.sd.launch(u, n, u.buf)
	select {
	case b := <-u.sd.spare:
		u.buf = b
	default:
		u.buf = u.newBuf()
	}
	if publish {
		return u.publishSent(ctx)
	}
	return nil
}

// publishSent writes the hash state after the last of the parts the
// store took in a row: from then on the store's offset covers them.
func (u *Upload) publishSent(ctx context.Context) error {
	n := u.sd.sentThrough(u.published)
	if n == u.published {
		return nil
	}
	if _, err := u.s.put(ctx, u.s.hashKey(u.rec.ID, int32(n)), u.hashes[int32(n)], cond{}); err != nil {
		return classify("saving the upload's hash state", err)
	}
	for k := range u.hashes {
		if int(k) <= n {
			delete(u.hashes, k)
		}
	}
	u.published = n
	u.durable = min(int64(n)*u.rec.PartSize, u.rec.Size)
	u.updated = u.s.o.Now()
	return nil
}

// publish waits for every part in flight and publishes them.
func (u *Upload) publish(ctx context.Context) error {
	if err := u.sd.drain(); err != nil {
		return err
	}
	return u.publishSent(ctx)
}

// rollback drops what the writer holds beyond the durable offset, after a
// failure that leaves unknown which of those bytes the store has, or a
// body refused whole: the parts sent since are not published, so the
// store's state is still the durable one. The writer is done (its next
// write is refused); the next one loads the upload from the store.
func (u *Upload) rollback() {
	u.freeBuf() // waits for the parts in flight
	u.sd.forget(u.published)
	u.written = u.durable
	u.parts = u.parts[:u.published]
	clear(u.hashes)
	u.loaded = false
}

// newBuf is the upload's part buffer, counted in Stats.BufferBytes (the
// memory of the uploads being written: a part each).
func (u *Upload) newBuf() []byte {
	st := &u.s.Stats
	n := st.BufferBytes.Add(u.rec.PartSize)
	for {
		p := st.BufferPeak.Load()
		if n <= p || st.BufferPeak.CompareAndSwap(p, n) {
			break
		}
	}
	return make([]byte, 0, u.rec.PartSize)
}

func (u *Upload) freeBuf() {
	if u.sd == nil {
		return // never restored
	}
	u.sd.drain()
	if u.buf != nil {
		u.s.Stats.BufferBytes.Add(-int64(cap(u.buf)))
		u.buf = nil
	}
	for {
		select {
		case b := <-u.sd.spare:
			u.s.Stats.BufferBytes.Add(-int64(cap(b)))
		default:
			return
		}
	}
}

// Checkpoint makes the bytes written so far durable: the hash state after
// the last part, and the bytes after it as the tail object.
func (u *Upload) Checkpoint() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.checkpointLocked()
}

func (u *Upload) checkpointLocked() error {
	if u.done || !u.loaded || u.written == u.durable {
		return nil
	}
	ctx, cancel := u.s.opCtx()
	defer cancel()
	if err := u.renew(ctx); err != nil {
		return err
	}
	if err := u.publish(ctx); err != nil {
		u.rollback()
		return err
	}
	if len(u.buf) > 0 {
		t := tail{After: int32(len(u.parts)), Hash: marshalHash(u.hash), Data: u.buf}
		if _, err := u.s.put(ctx, u.s.tailKey(u.rec.ID), t.encode(), cond{}); err != nil {
			u.rollback()
			return classify("saving the upload's tail", err)
		}
	}
	u.durable = u.written
	u.updated = u.s.o.Now()
	return nil
}

// ReadFrom appends what r gives at off until EOF (a tus PATCH, an HTTP
// POST body). With sum (a fresh hash of the body) and want, a body whose
// hash differs is refused whole: the parts it filled are sent but not
// published, so the store's offset stays where the body began. The new
// offset is durable on return.
func (u *Upload) ReadFrom(off int64, r io.Reader, sum hash.Hash, want []byte) (int64, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := u.check(off, 0); err != nil {
		return u.written, err
	}
	if err := u.checkpointLocked(); err != nil { // so that a refusal drops only this body
		return u.written, err
	}
	start := u.written
	ctx, cancel := u.s.opCtx()
	defer cancel()
	var rerr error
	for rerr == nil {
		if u.written == u.rec.Size {
			// Nothing more fits: a byte more is over the size.
			var one [1]byte
			if n, _ := io.ReadFull(r, one[:]); n > 0 {
				u.rollback()
				return start, fmt.Errorf("%w: more than %d bytes", xfer.ErrOverSize, u.rec.Size)
			}
			break
		}
		// Read into the part buffer's free room, no copy.
		room := min(u.rec.PartSize-int64(len(u.buf)), u.rec.Size-u.written)
		free := u.buf[len(u.buf) : int64(len(u.buf))+room]
		n, err := io.ReadFull(r, free)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		if n > 0 {
			if sum != nil {
				sum.Write(free[:n])
			}
			if aerr := u.renewIfDue(ctx); aerr != nil {
				u.rollback()
				return start, aerr
			}
			// append copies free[:n] onto itself: the bytes are in place.
			if aerr := u.append(ctx, free[:n], sum == nil); aerr != nil {
				return u.written, aerr
			}
		}
		if err == io.EOF {
			break
		}
		rerr = err
	}
	if sum != nil && (rerr != nil || !bytes.Equal(sum.Sum(nil), want)) {
		u.rollback()
		if rerr != nil {
			return start, rerr
		}
		u.s.Stats.ChunksRejected.Add(1)
		return start, fmt.Errorf("%w: the body at offset %d", xfer.ErrChecksum, start)
	}
	if err := u.checkpointLocked(); err != nil {
		return u.written, err
	}
	return u.written, rerr
}
