package s3store

import (
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/xfer"
)

// The keys of an upload's state, under the store's prefix. A name never
// starts with "." (xfer.ValidateName), so no file lands among them.
const stateDir = ".sluice/"

func (s *Store) key(name string) string     { return s.loc.Prefix + name }
func (s *Store) upDir(id string) string     { return s.loc.Prefix + stateDir + "up/" + id + "/" }
func (s *Store) infoKey(id string) string   { return s.upDir(id) + "info" }
func (s *Store) tailKey(id string) string   { return s.upDir(id) + "tail" }
func (s *Store) leaseKey(id string) string  { return s.upDir(id) + "lease" }
func (s *Store) nameKey(name string) string { return s.loc.Prefix + stateDir + "name/" + name }
func (s *Store) doneKey(id string) string   { return s.loc.Prefix + stateDir + "done/" + id }
func (s *Store) partDir() string            { return s.loc.Prefix + stateDir + "part/" }

// objKey is where the multipart upload of r lands: the file's key, or a
// partial upload's (tus concatenation) hidden key, which no name reaches.
func (s *Store) objKey(r *record) string {
	if r.Partial {
		return s.partDir() + r.ID
	}
	return s.key(r.Name)
}
func (s *Store) hashKey(id string, n int32) string {
	return s.upDir(id) + "hash-" + strconv.FormatInt(int64(n), 10)
}

// record is an upload's info object: what it is, written once at Begin.
type record struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Size     int64     `json:"size"`
	SHA256   []byte    `json:"sha256,omitempty"`
	Meta     string    `json:"meta,omitempty"`
	Keep     bool      `json:"keep,omitempty"`
	Created  time.Time `json:"created"`
	UploadID string    `json:"upload_id"` // the S3 multipart upload's
	PartSize int64     `json:"part_size"`
	// Partial: a partial upload (BeginPartial), landing at objKey. Parts:
	// the partial uploads a final upload is made of (Concat).
	Partial bool     `json:"partial,omitempty"`
	Parts   []string `json:"parts,omitempty"`
}

// maxParts is S3's limit on the parts of a multipart upload; minPart its
// smallest part but the last.
const (
	maxParts = 10000
	minPart  = 5 << 20
)

var errBadRecord = errors.New("not an upload's info object")

// decodeRecord parses an info object, refusing one that breaks the
// invariants the upload relies on (a valid name, a part size S3 takes
// that reaches the size within maxParts).
func decodeRecord(b []byte) (*record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadRecord, err)
	}
	switch {
	case r.ID == "" || strings.ContainsAny(r.ID, "/"):
		return nil, fmt.Errorf("%w: bad id %q", errBadRecord, r.ID)
	case xfer.ValidateName(r.Name) != nil:
		return nil, fmt.Errorf("%w: bad name %q", errBadRecord, r.Name)
	case r.Size < 0 || r.UploadID == "":
		return nil, fmt.Errorf("%w: size %d, upload id %q", errBadRecord, r.Size, r.UploadID)
	case r.PartSize < minPart || (r.Size+r.PartSize-1)/r.PartSize > maxParts:
		return nil, fmt.Errorf("%w: part size %d for %d bytes", errBadRecord, r.PartSize, r.Size)
	case r.SHA256 != nil && len(r.SHA256) != sha256.Size:
		return nil, fmt.Errorf("%w: sha256 of %d bytes", errBadRecord, len(r.SHA256))
	}
	return &r, nil
}

// partSizeFor is the part size of an upload of size bytes: at least want,
// large enough that the upload fits in maxParts, a whole number of MiB.
func partSizeFor(size, want int64) int64 {
	ps := max(want, minPart)
	if need := (size + maxParts - 1) / maxParts; need > ps {
		ps = (need + 1<<20 - 1) &^ (1<<20 - 1)
	}
	return ps
}

// tail is the bytes after part After (those of a checkpoint between part
// boundaries) and the hash state after them. On the wire: After (4 bytes,
// big-endian), the hash state's length (2), the state, then the bytes.
type tail struct {
	After int32
	Hash  []byte
	Data  []byte
}

func (t *tail) encode() []byte {
	b := make([]byte, 0, 6+len(t.Hash)+len(t.Data))
	b = binary.BigEndian.AppendUint32(b, uint32(t.After))
	b = binary.BigEndian.AppendUint16(b, uint16(len(t.Hash)))
	b = append(b, t.Hash...)
	return append(b, t.Data...)
}

var errBadTail = errors.New("not an upload's tail object")

// decodeTail parses a tail object; its hash state must restore.
func decodeTail(b []byte) (*tail, error) {
	if len(b) < 6 {
		return nil, fmt.Errorf("%w: %d bytes", errBadTail, len(b))
	}
	t := &tail{After: int32(binary.BigEndian.Uint32(b))}
	n := int(binary.BigEndian.Uint16(b[4:]))
	if t.After < 0 || 6+n > len(b) {
		return nil, fmt.Errorf("%w: part %d, hash state of %d bytes in %d", errBadTail, t.After, n, len(b))
	}
	t.Hash, t.Data = b[6:6+n], b[6+n:]
	if _, err := restoreHash(t.Hash); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadTail, err)
	}
	return t, nil
}

func marshalHash(h hash.Hash) []byte {
	b, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		panic(err) // crypto/sha256 always marshals
	}
	return b
}

func restoreHash(state []byte) (hash.Hash, error) {
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
		return nil, err
	}
	return h, nil
}

// lease says which writer holds an upload, and until when by its clock.
type lease struct {
	Owner string    `json:"owner"`
	Until time.Time `json:"until"`
}
