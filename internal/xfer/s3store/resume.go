package s3store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sluicehq/sluice/internal/xfer"
)

// state is an upload as the store holds it: what a writer resumes from.
type state struct {
	rec *record
	// parts are the parts 1..len(parts) the offset covers, each
	// rec.PartSize bytes, the last maybe fewer (the file's end).
	parts []types.CompletedPart
	// hash is the SHA-256 state after the parts (nil: nothing hashed).
	hash []byte
	// tail is the bytes after the parts, and tailHash the state after them.
	tail, tailHash []byte
	offset         int64
	updated        time.Time
}

func (st *state) info(expire time.Duration) xfer.Info {
	r := st.rec
	in := xfer.Info{ID: r.ID, Name: r.Name, Size: r.Size, Offset: st.offset, Meta: r.Meta, SHA256: r.SHA256,
		Created: r.Created, Updated: st.updated, Partial: r.Partial, Parts: r.Parts}
	if expire > 0 {
		in.Expires = st.updated.Add(expire)
	}
	return in
}

// load reads the upload id from the store: its info, the parts S3 lists,
// the hash state after the last of them that has one, and the tail that
// follows them. xfer.ErrNotFound when there is no such partial upload (or
// its multipart upload is gone: completed, aborted or expired by another
// server, whose leftover state load removes).
func (s *Store) load(ctx context.Context, id string) (*state, error) {
	o, err := s.get(ctx, s.infoKey(id))
	if notFound(err) {
		return nil, xfer.ErrNotFound
	}
	if err != nil {
		return nil, classify("reading the upload's info", err)
	}
	rec, err := decodeRecord(o.body)
	if err != nil || rec.ID != id {
		s.log.Warn("an upload's info object is unreadable; ignoring it (expiry removes it)", "id", id, "err", err)
		return nil, xfer.ErrNotFound
	}
	parts, err := s.parts(ctx, rec)
	if notFound(err) {
		s.log.Info("an upload's multipart upload is gone; removing its state", "name", rec.Name, "id", id)
		s.delAll(ctx, s.upDir(id))
		return nil, xfer.ErrNotFound
	}
	if err != nil {
		return nil, classify("listing the upload's parts", err)
	}
	st := &state{rec: rec, updated: o.modified}
	k := contiguous(rec, parts)
	for ; k > 0; k-- {
		h, err := s.get(ctx, s.hashKey(id, int32(k)))
		if notFound(err) {
			continue // the server stopped between the part and its hash state
		}
		if err != nil {
			return nil, classify("reading the upload's hash state", err)
		}
		if _, err := restoreHash(h.body); err != nil {
			continue
		}
		st.hash = h.body
		st.updated = later(st.updated, h.modified)
		break
	}
	for _, p := range parts[:k] {
		st.parts = append(st.parts, types.CompletedPart{ETag: p.ETag, PartNumber: p.PartNumber})
		st.offset += aws.ToInt64(p.Size)
	}
	if err := s.loadTail(ctx, st); err != nil {
		return nil, err
	}
	return st, nil
}

// contiguous is how many of parts are 1, 2, ... each a whole part (the
// last may end the file).
func contiguous(rec *record, parts []types.Part) int {
	k := 0
	for i, p := range parts {
		want := min(rec.PartSize, rec.Size-int64(i)*rec.PartSize)
		if aws.ToInt32(p.PartNumber) != int32(i+1) || aws.ToInt64(p.Size) != want {
			break
		}
		k++
	}
	return k
}

// loadTail adds the tail object to st when it follows st's parts.
func (s *Store) loadTail(ctx context.Context, st *state) error {
	o, err := s.get(ctx, s.tailKey(st.rec.ID))
	if notFound(err) {
		return nil
	}
	if err != nil {
		return classify("reading the upload's tail", err)
	}
	t, err := decodeTail(o.body)
	if err != nil || int(t.After) != len(st.parts) || int64(len(t.Data)) >= st.rec.PartSize ||
		st.offset+int64(len(t.Data)) > st.rec.Size {
		return nil // older than the parts, or not ours: the parts stand
	}
	st.tail, st.tailHash = t.Data, t.Hash
	st.offset += int64(len(t.Data))
	st.updated = later(st.updated, o.modified)
	return nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// readLease is the upload's lease and its ETag (nil: none).
func (s *Store) readLease(ctx context.Context, id string) (*lease, string, error) {
	o, err := s.get(ctx, s.leaseKey(id))
	if notFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	var l lease
	if json.Unmarshal(o.body, &l) != nil {
		return &lease{}, o.etag, nil // unreadable: as an expired one
	}
	return &l, o.etag, nil
}
