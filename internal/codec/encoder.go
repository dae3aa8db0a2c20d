package codec

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/klauspost/compress/zstd"
)

// Level is a compression level: how much CPU an Encoder spends per byte.
// The zero value is LevelDefault.
type Level uint8

const (
	// LevelDefault is zstd's default level (about zstd -3): the usual
	// choice, and the level Train tunes dictionaries for.
	LevelDefault Level = iota
	// LevelFastest (about zstd -1) for agents short of CPU.
	LevelFastest
	// LevelBetter (about zstd -7) for agents short of bandwidth.
	LevelBetter
)

// String returns the level's name.
func (l Level) String() string {
	switch l {
	case LevelDefault:
		return "default"
	case LevelFastest:
		return "fastest"
	case LevelBetter:
		return "better"
	}
	return "Level(" + strconv.Itoa(int(l)) + ")"
}

// ParseLevel is the inverse of String: "default", "fastest" or "better".
func ParseLevel(s string) (Level, error) {
	for _, l := range []Level{LevelDefault, LevelFastest, LevelBetter} {
		if s == l.String() {
			return l, nil
		}
	}
	return 0, fmt.Errorf("compression level %q: want default, fastest or better", s)
}

func (l Level) zstd() (zstd.EncoderLevel, bool) {
	switch l {
	case LevelDefault:
		return zstd.SpeedDefault, true
	case LevelFastest:
		return zstd.SpeedFastest, true
	case LevelBetter:
		return zstd.SpeedBetterCompression, true
	}
	return 0, false
}

// windowSize caps how far back a match may reach in one message. zstd's
// default of 8 MiB makes each encoder keep a 16 MiB history buffer once it
// has seen a message over 128 KiB; batches gain nothing measurable from
// matches more than 1 MiB back, and an Encoder holds one zstd encoder per
// dictionary in use.
const windowSize = 1 << 20

// Encoder compresses message bodies. It is not safe for concurrent use: give
// each goroutine its own. It keeps one zstd encoder for plain zstd and one
// per dictionary, each created on first use (and then reused with its
// buffers), so holding many dictionaries costs little until they are used.
type Encoder struct {
	level zstd.EncoderLevel
	// plain is the dictionary-less encoder, nil until the first Zstd
	// message.
	plain *zstd.Encoder
	dicts map[uint32]*dictEncoder
}

// dictEncoder is one dictionary of an Encoder.
type dictEncoder struct {
	// data is the Encoder's own copy of the dictionary, needed to create
	// enc and to tell a repeated AddDictionary from a conflicting one.
	data []byte
	// enc is nil until the first message with this dictionary.
	enc *zstd.Encoder
}

// NewEncoder returns an Encoder compressing at level. It panics if level is
// not one of the Level constants, which is a programming error.
func NewEncoder(level Level) *Encoder {
	zl, ok := level.zstd()
	if !ok {
		panic("codec: NewEncoder: invalid " + level.String())
	}
	return &Encoder{level: zl, dicts: make(map[uint32]*dictEncoder)}
}

// AddDictionary makes d available to Encode with kind ZstdDict and dictID
// d.ID. It checks that d.Data is a valid dictionary whose header id is d.ID
// (ErrInvalidDictionary otherwise). Adding the same dictionary again is a
// no-op; adding different bytes under a known id fails with
// ErrDictionaryConflict. d.Data is copied.
func (e *Encoder) AddDictionary(d Dictionary) error {
	if err := d.check(); err != nil {
		return err
	}
	if have, ok := e.dicts[d.ID]; ok {
		if bytes.Equal(have.data, d.Data) {
			return nil
		}
		return fmt.Errorf("%w: id %d", ErrDictionaryConflict, d.ID)
	}
	e.dicts[d.ID] = &dictEncoder{data: bytes.Clone(d.Data)}
	return nil
}

// HasDictionary reports whether a dictionary with this id was added.
func (e *Encoder) HasDictionary(id uint32) bool {
	_, ok := e.dicts[id]
	return ok
}

// Encode appends src, encoded as kind, to dst and returns the extended
// slice. Plain copies src. Zstd and ZstdDict append exactly one zstd frame
// that records the content size and a checksum; ZstdDict uses the
// dictionary dictID, which must have been added (ErrUnknownDictionary
// otherwise). dictID must be 0 for the other kinds. An empty src still
// gives a frame, so every compressed message is a frame. src and dst must
// not overlap. On error dst is returned unchanged.
//
// With a reused dst that has room, Encode does not allocate once the zstd
// encoder for the kind and dictionary has warmed up.
func (e *Encoder) Encode(dst, src []byte, kind Kind, dictID uint32) ([]byte, error) {
	switch kind {
	case Plain, Zstd:
		if dictID != 0 {
			return dst, fmt.Errorf("%w: dictionary id %d with kind %v", errKind, dictID, kind)
		}
		if kind == Plain {
			return append(dst, src...), nil
		}
		if e.plain == nil {
			e.plain = e.newZstd(nil)
		}
		return e.plain.EncodeAll(src, dst), nil
	case ZstdDict:
		if dictID == 0 {
			return dst, fmt.Errorf("%w: kind %v needs a dictionary id", errKind, kind)
		}
		de, ok := e.dicts[dictID]
		if !ok {
			return dst, fmt.Errorf("%w: id %d", ErrUnknownDictionary, dictID)
		}
		if de.enc == nil {
			de.enc = e.newZstd(de.data)
		}
		return de.enc.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("%w: %v", errKind, kind)
}

// newZstd creates a zstd encoder for EncodeAll only, with dictionary data if
// not nil. The options are fixed and the dictionary was checked when it was
// added, so an error here is a bug.
func (e *Encoder) newZstd(data []byte) *zstd.Encoder {
	opts := []zstd.EOption{
		// EncodeAll runs on the caller's goroutine; more would only hold
		// more idle state.
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderLevel(e.level),
		zstd.WithWindowSize(windowSize),
		// Single-segment frames always record the content size (by
		// default zstd leaves it out below 256 bytes), which lets a
		// Decoder size its output, or refuse it, from the header. It
		// also saves the window byte; the decoder needs the whole
		// message in memory anyway.
		zstd.WithSingleSegment(true),
		// A 4-byte xxhash of the content, so corruption that still
		// parses is detected.
		zstd.WithEncoderCRC(true),
		// An empty body still becomes a frame, as the wire requires.
		zstd.WithZeroFrames(true),
	}
	if data != nil {
		opts = append(opts, zstd.WithEncoderDict(data))
	}
	enc, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		panic("codec: creating zstd encoder: " + err.Error())
	}
	return enc
}
