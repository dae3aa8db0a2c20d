package diskstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/seglog"
)

// The sidecar file holds two fixed-size slots. Each save writes the slot
// that does not hold the newest record (seq parity), so a write torn by a
// crash leaves the previous record intact in the other slot.
const (
	slotSize   = 4096
	slotHeader = 12         // magic(4) length(4) crc32c(4)
	slotMagic  = 0x58464552 // "XFER"
	maxMeta    = 2048       // tus Upload-Metadata kept in the sidecar
)

// record is one sidecar slot's content.
type record struct {
	Seq    uint64 `json:"seq"`
	ID     string `json:"id"`
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Offset int64  `json:"offset"`
	SHA256 []byte `json:"sha256,omitempty"` // expected, when the client gave it
	Hash   []byte `json:"hash"`             // crypto/sha256 state at Offset (encoding.BinaryMarshaler)
	Meta   string `json:"meta,omitempty"`   // tus Upload-Metadata as received
	// Keep: once finished, the upload's description stays (a .done
	// file) until it expires, so that tus HEAD answers it (BeginKept).
	Keep    bool      `json:"keep,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

func (r *record) encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keeps tus metadata as short as it came
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(body) > slotSize-slotHeader {
		return nil, fmt.Errorf("sidecar record of %d bytes does not fit a slot", len(body))
	}
	b := make([]byte, slotSize)
	binary.BigEndian.PutUint32(b[0:], slotMagic)
	binary.BigEndian.PutUint32(b[4:], uint32(len(body)))
	binary.BigEndian.PutUint32(b[8:], xfer.CRC32C(body))
	copy(b[slotHeader:], body)
	return b, nil
}

var errBadSlot = errors.New("bad sidecar slot")

func decodeSlot(b []byte) (*record, error) {
	if len(b) < slotHeader || binary.BigEndian.Uint32(b[0:]) != slotMagic {
		return nil, errBadSlot
	}
	n := int(binary.BigEndian.Uint32(b[4:]))
	if n > len(b)-slotHeader || n > slotSize-slotHeader {
		return nil, errBadSlot
	}
	body := b[slotHeader : slotHeader+n]
	if xfer.CRC32C(body) != binary.BigEndian.Uint32(b[8:]) {
		return nil, errBadSlot
	}
	var r record
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, errBadSlot
	}
	if r.Offset < 0 || r.Size < 0 || r.Offset > r.Size || len(r.Hash) == 0 {
		return nil, errBadSlot
	}
	return &r, nil
}

// decodeSidecar returns the newest valid record of a sidecar's bytes, and
// how many of its two slots were bad (a crash during a save tears one).
func decodeSidecar(b []byte) (*record, int, error) {
	var best *record
	bad := 0
	for i := 0; i < 2; i++ {
		lo := i * slotSize
		if lo >= len(b) {
			bad++
			continue
		}
		r, err := decodeSlot(b[lo:min(len(b), lo+slotSize)])
		if err != nil {
			bad++
			continue
		}
		if best == nil || r.Seq > best.Seq {
			best = r
		}
	}
	if best == nil {
		return nil, bad, errors.New("sidecar has no valid record")
	}
	return best, bad, nil
}

// sidecar is an open ID.meta file.
type sidecar struct {
	f seglog.File
}

// save writes r into the slot its sequence number selects and fsyncs.
func (s *sidecar) save(r *record) error {
	b, err := r.encode()
	if err != nil {
		return err
	}
	if _, err := s.f.WriteAt(b, int64(r.Seq%2)*slotSize); err != nil {
		return err
	}
	// The file's two slots were written when it was created: a save
	// changes data only, which fdatasync covers.
	return s.f.Datasync()
}
