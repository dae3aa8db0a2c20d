package codec

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"
)

const (
	// MinTrainSamples is the fewest non-empty samples Train accepts. Fewer
	// give a dictionary fitted to a handful of messages that helps little
	// with the next ones, and the trainer itself may fail on them.
	MinTrainSamples = 8

	// MinDictionarySize and MaxDictionarySize bound the size argument of
	// Train, and MaxDictionarySize also bounds what ParseDictionary accepts
	// from the wire, since every dictionary an agent uploads is kept in
	// memory by the sink. 64 KiB is the size the benchmarks use.
	MinDictionarySize = 1 << 10
	// MaxDictionarySize: see MinDictionarySize.
	MaxDictionarySize = 1 << 20

	// dictHeaderLen is the zstd dictionary magic plus the dictionary id.
	dictHeaderLen = 8
	// dictMagic starts every zstd dictionary (0xEC30A437 little-endian).
	dictMagic = "\x37\xa4\x30\xec"

	// privateIDMin and privateIDMax bound the dictionary ids zstd leaves
	// for private use: 1..32767 and ids >= 2^31 are reserved for a public
	// registry by the zstd format.
	privateIDMin = 1 << 15
	privateIDMax = 1<<31 - 1
)

// Dictionary is a trained zstd dictionary in zstd's dictionary format
// (the bytes uploaded in Request.dictionary) and its id.
//
// ID is always the Dictionary_ID of the zstd header in Data: frames record
// that id, and the wire protocol requires the message's dictionary_id to
// equal it. It is never 0, which zstd reserves for "no dictionary".
type Dictionary struct {
	// ID names the dictionary in ZstdDict messages; equal to the id in
	// Data's header, never 0.
	ID uint32
	// Data is the dictionary in zstd's format, magic number first. Encoders
	// and Decoders copy what they need, so it may be reused after
	// AddDictionary returns.
	Data []byte
}

// Train builds a dictionary of about size bytes of content from samples,
// which should be typical message bodies (other than the ones it will
// compress, to be honest about the gain). It uses klauspost/compress's
// dict.BuildZstdDict, tuned for the default zstd level.
//
// The id is derived from the content: the first 4 bytes of the SHA-256 of
// the dictionary after its header, mapped into zstd's private id range
// [32768, 2^31). The same bytes therefore always get the same id, on every
// agent and after restarts, which the protocol requires (an id must always
// denote the same bytes), with no id registry to persist. Two different
// dictionaries of one agent collide with probability about 2^-31;
// AddDictionary reports such a collision as ErrDictionaryConflict instead
// of mixing them up. The trainer itself is not deterministic (it iterates
// maps), so training twice on the same samples gives two dictionaries with
// different ids: persist the one in use rather than retrain it.
//
// Training is CPU-heavy (about 1.5 s for 3.7 MB of samples and a 64 KiB
// dictionary here): keep it off the send path. The result may be slightly
// larger than size (entropy tables) or smaller (too little repeated
// content).
//
// It fails with fewer than MinTrainSamples non-empty samples or a size
// outside [MinDictionarySize, MaxDictionarySize], and when the trainer
// cannot build a dictionary from the data (all samples shorter than 8
// bytes, or nothing repeated across them).
func Train(samples [][]byte, size int) (Dictionary, error) {
	if size < MinDictionarySize || size > MaxDictionarySize {
		return Dictionary{}, fmt.Errorf("codec: train: dictionary size %d outside [%d, %d]", size, MinDictionarySize, MaxDictionarySize)
	}
	nonEmpty := 0
	for _, s := range samples {
		if len(s) > 0 {
			nonEmpty++
		}
	}
	if nonEmpty < MinTrainSamples {
		return Dictionary{}, fmt.Errorf("codec: train: %d non-empty samples, need at least %d", nonEmpty, MinTrainSamples)
	}
	data, err := dict.BuildZstdDict(samples, dict.Options{
		MaxDictSize: size,
		// Shortest match the trainer indexes. On the metrics-like
		// benchmark data 7 was best by a hair (6 and 8 within 3%, 4 and 5
		// clearly worse).
		HashBytes: 7,
		// Any fixed non-zero id: BuildZstdDict would pick a random one,
		// and the real id is written over it below.
		ZstdDictID: privateIDMin,
		// Match the entropy tables to the level Encoders use by default.
		ZstdLevel: zstd.SpeedDefault,
	})
	if err != nil {
		return Dictionary{}, fmt.Errorf("codec: train: %w", err)
	}
	if len(data) <= dictHeaderLen || string(data[:4]) != dictMagic {
		return Dictionary{}, fmt.Errorf("codec: train: trainer returned no zstd dictionary")
	}
	id := contentID(data)
	binary.LittleEndian.PutUint32(data[4:dictHeaderLen], id)
	// Check the result loads, so a trainer bug fails here rather than on
	// the sink.
	if _, err := inspect(data); err != nil {
		return Dictionary{}, fmt.Errorf("codec: train: %w", err)
	}
	return Dictionary{ID: id, Data: data}, nil
}

// contentID derives a dictionary id from everything after the header, so it
// does not depend on the id already written there.
func contentID(data []byte) uint32 {
	sum := sha256.Sum256(data[dictHeaderLen:])
	h := binary.BigEndian.Uint32(sum[:4])
	return privateIDMin + h%(privateIDMax-privateIDMin+1)
}

// ParseDictionary checks that data, typically received from the wire, is a
// zstd dictionary the encoder and decoder can load, and returns it with the
// id from its header. The caller should check that this id equals the one
// the message carried. It returns an error wrapping ErrInvalidDictionary,
// never panics, and copies data, so the caller's buffer may be reused.
func ParseDictionary(data []byte) (Dictionary, error) {
	id, err := inspect(data)
	if err != nil {
		return Dictionary{}, err
	}
	return Dictionary{ID: id, Data: bytes.Clone(data)}, nil
}

// ReadDictionaryFile reads a dictionary file (`sluice dict train`'s
// output, an agent's --dict) and checks it as ParseDictionary does; the
// errors name the file.
func ReadDictionaryFile(path string) (Dictionary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Dictionary{}, err
	}
	d, err := ParseDictionary(data)
	if err != nil {
		return Dictionary{}, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// inspect validates a zstd dictionary and returns its header id.
func inspect(data []byte) (uint32, error) {
	if len(data) > MaxDictionarySize+(64<<10) {
		// The slack allows for the entropy tables in front of the content.
		return 0, fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrInvalidDictionary, len(data), MaxDictionarySize)
	}
	if len(data) <= dictHeaderLen {
		return 0, fmt.Errorf("%w: %d bytes is too short", ErrInvalidDictionary, len(data))
	}
	if string(data[:4]) != dictMagic {
		return 0, fmt.Errorf("%w: bad magic %x, not a zstd dictionary", ErrInvalidDictionary, data[:4])
	}
	id := binary.LittleEndian.Uint32(data[4:dictHeaderLen])
	if id == 0 {
		return 0, fmt.Errorf("%w: id 0 (reserved for no dictionary)", ErrInvalidDictionary)
	}
	// Load the entropy tables and offsets as the encoder and decoder will.
	if _, err := zstd.InspectDictionary(data); err != nil {
		return 0, fmt.Errorf("%w: id %d: %w", ErrInvalidDictionary, id, err)
	}
	return id, nil
}

// check verifies d before an Encoder or Decoder takes it: Data must parse
// and its header id must equal ID, because frames carry the header id and a
// mismatch would make every message fail on the other side.
func (d Dictionary) check() error {
	if d.ID == 0 {
		return fmt.Errorf("%w: id 0 (reserved for no dictionary)", ErrInvalidDictionary)
	}
	id, err := inspect(d.Data)
	if err != nil {
		return err
	}
	if id != d.ID {
		return fmt.Errorf("%w: ID %d but the zstd header says %d", ErrInvalidDictionary, d.ID, id)
	}
	return nil
}
