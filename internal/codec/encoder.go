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
	// choice, and the level Train tunes dictionaries for. With a
	// dictionary, messages up to 32 KiB are compressed with the fastest
	// level's match finder (see smallDictMessage).
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
// each goroutine its own. It keeps one zstd encoder for plain zstd and, per
// dictionary, one for small messages and one for the others (at
// LevelDefault; see smallDictMessage), each created on first use and then
// reused with its buffers and tables, so holding many dictionaries costs
// little until they are used.
type Encoder struct {
	level zstd.EncoderLevel
	// plain is the dictionary-less encoder, nil until the first Zstd
	// message.
	plain *zstd.Encoder
	// kafka is plain without the frame's xxhash, for KafkaZstd; nil
	// until the first such message. See kafkaChecksum. At most one of
	// plain and kafka is held: switching kind drops the other.
	kafka *zstd.Encoder
	dicts map[uint32]*dictEncoder
}

// dictEncoder is one dictionary of an Encoder.
type dictEncoder struct {
	// data is the Encoder's own copy of the dictionary, needed to create
	// enc and to tell a repeated AddDictionary from a conflicting one.
	data []byte
	// enc is nil until the first message with this dictionary that
	// pickDictEncoder gives to the Encoder's level.
	enc *zstd.Encoder
	// small is nil until the first message that pickDictEncoder gives to
	// zstd's fastest match finder.
	small *zstd.Encoder
}

// smallDictMessage is the largest message that, at LevelDefault with a
// dictionary, is compressed with zstd's fastest match finder rather than
// the default one.
//
// Why: klauspost/compress's dictionary encoders restore their match tables
// from the dictionary's before every frame (doubleFastEncoderDict.Reset
// and fastEncoderDict.Reset). At the default level that is 1.25 MiB of
// tables per message whatever its size, more than compressing a 16 KiB
// message costs: in `sluice bench wan --scenarios seed` (messages of
// 2–400 KiB, mean 16 KiB) Reset took 2.3 times the CPU of the dictionary
// compression itself, and the agent 2× the CPU of plain zstd. The fastest
// match finder restores 256 KiB. With the dictionary it still beats plain
// zstd at the default level on ratio up to this size
// (TestSmallDictMessagesBeatPlainZstd), at about plain zstd's cost; above
// it the restore is amortised and the default finder's better matches
// pay.
const smallDictMessage = 32 << 10

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

// States is how many zstd encoders e holds (each is made on first use of
// its kind or dictionary and holds its tables and window: at the default
// level 1.6 MB after a 1 KiB message, 3.7 MB after a 256 KiB one,
// BenchmarkZstdState): what e costs in memory beyond its struct.
func (e *Encoder) States() int {
	n := 0
	for _, z := range []*zstd.Encoder{e.plain, e.kafka} {
		if z != nil {
			n++
		}
	}
	for _, de := range e.dicts {
		if de.enc != nil {
			n++
		}
		if de.small != nil {
			n++
		}
	}
	return n
}

// HasDictionary reports whether a dictionary with this id was added.
func (e *Encoder) HasDictionary(id uint32) bool {
	_, ok := e.dicts[id]
	return ok
}

// Encode appends src, encoded as kind, to dst and returns the extended
// slice. Plain copies src. Zstd, KafkaZstd and ZstdDict append exactly one zstd frame
// that records the content size and, except KafkaZstd's (kafkaChecksum),
// a checksum; ZstdDict uses the
// dictionary dictID, which must have been added (ErrUnknownDictionary
// otherwise). dictID must be 0 for the other kinds. An empty src still
// gives a frame, so every compressed message is a frame. src and dst must
// not overlap. On error dst is returned unchanged.
//
// With a reused dst that has room, Encode does not allocate once the zstd
// encoder for the kind and dictionary has warmed up.
func (e *Encoder) Encode(dst, src []byte, kind Kind, dictID uint32) ([]byte, error) {
	switch kind {
	case Plain, Zstd, KafkaZstd:
		if dictID != 0 {
			return dst, fmt.Errorf("%w: dictionary id %d with kind %v", errKind, dictID, kind)
		}
		if kind == Plain {
			return append(dst, src...), nil
		}
		// One dictionary-less state at a time: each holds its tables and
		// window, 3.7 MB after a 256 KiB message (BenchmarkZstdState), and
		// an agent switches kind only when a new sink's Welcome asks
		// otherwise, or for the rare whole message whose section would not
		// fit. Kept both, every encoder that sealed before a Welcome asked
		// for Kafka records would hold two for good.
		if kind == KafkaZstd {
			if e.kafka == nil {
				e.plain = nil
				e.kafka = e.newZstdAt(e.level, nil, kafkaChecksum)
			}
			return e.kafka.EncodeAll(src, dst), nil
		}
		if e.plain == nil {
			e.kafka = nil
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
		return e.pickDictEncoder(de, len(src)).EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("%w: %v", errKind, kind)
}

// pickDictEncoder returns the zstd encoder of de for a message of size
// bytes, creating it on first use: at LevelDefault, messages up to
// smallDictMessage get zstd's fastest match finder (see smallDictMessage);
// every other message, and every message at the other levels, the
// Encoder's level.
func (e *Encoder) pickDictEncoder(de *dictEncoder, size int) *zstd.Encoder {
	if e.level == zstd.SpeedDefault && size <= smallDictMessage {
		if de.small == nil {
			de.small = e.newZstdAt(zstd.SpeedFastest, de.data, true)
		}
		return de.small
	}
	if de.enc == nil {
		de.enc = e.newZstd(de.data)
	}
	return de.enc
}

// newZstd creates a zstd encoder at the Encoder's level, with the
// frame's checksum; see newZstdAt.
func (e *Encoder) newZstd(data []byte) *zstd.Encoder { return e.newZstdAt(e.level, data, true) }

// kafkaChecksum is whether a KafkaZstd frame carries zstd's xxhash of its
// content. It does not: the frame is checked whole by everyone who reads
// it without the hash — the spool's record checksum on the agent, the
// sink's byte-for-byte comparison with the section the agent must send
// (kafkarec.Records), Kafka's CRC-32C of the batch that holds it, in the
// broker and in every consumer — so hashing the content on seal and again
// on every decode only costs (1.8 % of an agent's seal in
// BenchmarkSealKafka, and as much again in the sink's decode).
const kafkaChecksum = false

// newZstdAt creates a zstd encoder for EncodeAll only, at level, with
// dictionary data if not nil. The options are fixed and the dictionary was
// checked when it was added, so an error here is a bug.
func (e *Encoder) newZstdAt(level zstd.EncoderLevel, data []byte, checksum bool) *zstd.Encoder {
	opts := []zstd.EOption{
		// EncodeAll runs on the caller's goroutine; more would only hold
		// more idle state.
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderLevel(level),
		zstd.WithWindowSize(windowSize),
		// Single-segment frames always record the content size (by
		// default zstd leaves it out below 256 bytes), which lets a
		// Decoder size its output, or refuse it, from the header. It
		// also saves the window byte; the decoder needs the whole
		// message in memory anyway.
		zstd.WithSingleSegment(true),
		// A 4-byte xxhash of the content, so corruption that still
		// parses is detected (not for KafkaZstd: kafkaChecksum).
		zstd.WithEncoderCRC(checksum),
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
