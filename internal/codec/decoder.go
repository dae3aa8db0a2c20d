package codec

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"

	"github.com/klauspost/compress/zstd"
)

// Decoder decompresses message bodies, never producing more than maxSize
// bytes for one message. It is not safe for concurrent use: give each
// goroutine its own (on the sink, one per agent stream, the scope of
// dictionary ids). It holds one zstd decoder, created on first use and
// reused, with all its dictionaries.
type Decoder struct {
	maxSize int
	// zd is nil until the first compressed message or dictionary.
	zd *zstd.Decoder
	// dicts maps the ids of added dictionaries to the SHA-256 of their
	// bytes, to tell a repeated AddDictionary from a conflicting one
	// without keeping a second copy (zd holds the loaded dictionary).
	dicts map[uint32][sha256.Size]byte
}

// NewDecoder returns a Decoder whose Decode fails with ErrTooLarge rather
// than produce more than maxSize bytes for one message (the sink's
// Welcome.max_message_bytes). It panics if maxSize is not positive, which
// is a programming error.
func NewDecoder(maxSize int) *Decoder {
	if maxSize <= 0 {
		panic(fmt.Sprintf("codec: NewDecoder: maxSize %d must be positive", maxSize))
	}
	return &Decoder{maxSize: maxSize, dicts: make(map[uint32][sha256.Size]byte)}
}

// zstdDecoder returns the zstd decoder, creating it on first use.
func (d *Decoder) zstdDecoder() *zstd.Decoder {
	if d.zd == nil {
		zd, err := zstd.NewReader(nil,
			// DecodeAll runs on the caller's goroutine.
			zstd.WithDecoderConcurrency(1),
			// Stop as soon as the output passes maxSize, also for frames
			// that do not declare their size; this also caps the window
			// a frame may ask for.
			zstd.WithDecoderMaxMemory(uint64(d.maxSize)),
		)
		if err != nil {
			// The options are fixed and valid.
			panic("codec: creating zstd decoder: " + err.Error())
		}
		d.zd = zd
	}
	return d.zd
}

// AddDictionary makes d available to decode ZstdDict messages naming d.ID.
// It checks that d.Data is a valid dictionary whose header id is d.ID
// (ErrInvalidDictionary otherwise). Adding the same dictionary again is a
// no-op; adding different bytes under a known id fails with
// ErrDictionaryConflict. d.Data is not retained.
func (d *Decoder) AddDictionary(dict Dictionary) error {
	if err := dict.check(); err != nil {
		return err
	}
	sum := sha256.Sum256(dict.Data)
	if have, ok := d.dicts[dict.ID]; ok {
		if have == sum {
			return nil
		}
		return fmt.Errorf("%w: id %d", ErrDictionaryConflict, dict.ID)
	}
	// Options accumulate: this adds dict to the ones already loaded.
	if err := d.zstdDecoder().ResetWithOptions(nil, zstd.WithDecoderDicts(dict.Data)); err != nil {
		return fmt.Errorf("%w: id %d: %w", ErrInvalidDictionary, dict.ID, err)
	}
	d.dicts[dict.ID] = sum
	return nil
}

// HasDictionary reports whether a dictionary with this id was added, so the
// sink can tell agents which ones it holds.
func (d *Decoder) HasDictionary(id uint32) bool {
	_, ok := d.dicts[id]
	return ok
}

// MaxSize returns the most bytes Decode produces for one message.
func (d *Decoder) MaxSize() int { return d.maxSize }

// Decode appends the body that src encodes as kind to dst and returns the
// extended slice. dictID names the dictionary for ZstdDict (0 there is a
// corrupt message) and must be 0 for the other kinds. maxSize bounds what
// is appended, not len(dst).
//
// Errors wrap ErrUnknownDictionary (dictID not added), ErrTooLarge (more
// than maxSize bytes, detected from the frame header before allocating
// when the frame declares its size) or ErrCorrupt (src is not exactly one
// valid zstd frame for that dictionary). On error dst is returned with its
// original length; bytes past it may have been overwritten. Decode never
// panics. src and dst must not overlap.
//
// With a reused dst that has room for the body, Decode does not allocate
// once warmed up. Otherwise dst grows once, to the size the frame
// declares. A frame that does not declare its size (Encoder always does;
// zstd's streaming encoders do not) is accepted too: its output grows as it
// is decoded and decoding stops at the first block past maxSize, so even a
// hostile one costs at most a few times maxSize in short-lived garbage.
func (d *Decoder) Decode(dst, src []byte, kind Kind, dictID uint32) ([]byte, error) {
	switch kind {
	case Plain:
		if dictID != 0 {
			return dst, fmt.Errorf("%w: dictionary id %d with kind %v", errKind, dictID, kind)
		}
		if len(src) > d.maxSize {
			return dst, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(src), d.maxSize)
		}
		return append(dst, src...), nil
	case Zstd, KafkaZstd:
		if dictID != 0 {
			return dst, fmt.Errorf("%w: dictionary id %d with kind %v", errKind, dictID, kind)
		}
	case ZstdDict:
		if dictID == 0 {
			// 0 means "no dictionary" to zstd and is invalid on the
			// wire: a bad message, not one to retry after an upload.
			return dst, fmt.Errorf("%w: %v message with dictionary id 0", ErrCorrupt, kind)
		}
		if _, ok := d.dicts[dictID]; !ok {
			return dst, fmt.Errorf("%w: id %d", ErrUnknownDictionary, dictID)
		}
	default:
		return dst, fmt.Errorf("%w: %v", errKind, kind)
	}

	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return dst, fmt.Errorf("%w: frame header: %w", ErrCorrupt, err)
	}
	if h.Skippable {
		return dst, fmt.Errorf("%w: skippable frame instead of a zstd frame", ErrCorrupt)
	}
	// A frame that names no dictionary decodes without one, which is
	// harmless; one that names another dictionary than the message would
	// be decoded with that one if the decoder holds it, so refuse it.
	if h.DictionaryID != 0 && h.DictionaryID != dictID {
		return dst, fmt.Errorf("%w: frame names dictionary %d, message %v with dictionary %d", ErrCorrupt, h.DictionaryID, kind, dictID)
	}
	if h.HasFCS && h.FrameContentSize > uint64(d.maxSize) {
		return dst, fmt.Errorf("%w: frame declares %d bytes, limit %d", ErrTooLarge, h.FrameContentSize, d.maxSize)
	}
	// DecodeAll would go on to decode any frames after the first, each
	// with whatever dictionary it names; a message is one frame.
	end, err := frameEnd(src, &h)
	if err != nil {
		return dst, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if end != len(src) {
		return dst, fmt.Errorf("%w: %d bytes after the frame", ErrCorrupt, len(src)-end)
	}

	base := len(dst)
	if h.HasFCS {
		// Bounded by maxSize above. Growing here and decoding into the
		// spare capacity, rather than passing dst itself, keeps zstd from
		// counting the bytes already in dst against maxSize.
		dst = slices.Grow(dst, int(h.FrameContentSize))
	}
	out, err := d.zstdDecoder().DecodeAll(src, dst[base:])
	if err != nil {
		switch {
		case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
			return dst[:base], fmt.Errorf("%w: limit %d: %w", ErrTooLarge, d.maxSize, err)
		case errors.Is(err, zstd.ErrUnknownDictionary):
			// Not reached: the frame's dictionary was checked above.
			return dst[:base], fmt.Errorf("%w: id %d: %w", ErrUnknownDictionary, h.DictionaryID, err)
		}
		return dst[:base], fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if len(out) > d.maxSize {
		// zstd enforces the limit too; this keeps the guarantee
		// independent of its internals.
		return dst[:base], fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(out), d.maxSize)
	}
	if len(out) == 0 {
		return dst[:base], nil
	}
	if cap(dst) > base && &dst[:base+1][base] == &out[0] {
		// Decoded in place into dst's spare capacity.
		return dst[:base+len(out)], nil
	}
	// zstd had to allocate (a frame without a declared size that did not
	// fit): copy over.
	return append(dst[:base], out...), nil
}

// frameEnd walks the block headers of the zstd frame at the start of src,
// whose header h describes, and returns the frame's length. It reads only
// headers and sizes; DecodeAll checks the contents.
func frameEnd(src []byte, h *zstd.Header) (int, error) {
	pos := h.HeaderSize
	for {
		if len(src)-pos < 3 {
			return 0, errors.New("frame truncated in a block header")
		}
		bh := uint32(src[pos]) | uint32(src[pos+1])<<8 | uint32(src[pos+2])<<16
		pos += 3
		size := int(bh >> 3)
		switch (bh >> 1) & 3 {
		case 0, 2: // raw, compressed: size bytes follow
		case 1: // RLE: one byte, repeated size times
			size = 1
		default:
			return 0, errors.New("reserved block type")
		}
		if len(src)-pos < size {
			return 0, errors.New("frame truncated in a block")
		}
		pos += size
		if bh&1 != 0 { // last block
			break
		}
	}
	if h.HasCheckSum {
		if len(src)-pos < 4 {
			return 0, errors.New("frame truncated in its checksum")
		}
		pos += 4
	}
	return pos, nil
}
