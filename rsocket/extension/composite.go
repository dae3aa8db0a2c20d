package extension

import (
	"errors"
	"fmt"
	"slices"
)

// Errors of the extension decoders and encoders. Decoders return a
// *MalformedError that wraps ErrMalformed; encoders return ErrTooLong,
// ErrEmpty or ErrNotASCII wrapped with context.
var (
	ErrMalformed = errors.New("malformed extension metadata")
	ErrTooLong   = errors.New("field too long")
	ErrEmpty     = errors.New("field must not be empty")
	ErrNotASCII  = errors.New("MIME and auth type strings must be US-ASCII")
)

// MalformedError says which extension format was bad and where.
type MalformedError struct {
	Format string // "composite metadata", "routing", "authentication"
	Offset int    // byte offset in the metadata where the bad entry starts
	Detail string
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("rsocket: %s at offset %d: %s", e.Format, e.Offset, e.Detail)
}

func (e *MalformedError) Unwrap() error { return ErrMalformed }

const maxUint24 = 1<<24 - 1

// Composite metadata (Extensions/CompositeMetadata.md) is a sequence of
// entries, each:
//
//	1 byte   M bit + 7 bits: with M, a well-known MIME id; without M, the
//	         length of the MIME string that follows, MINUS ONE
//	n bytes  MIME string (only without M)
//	3 bytes  metadata length
//	n bytes  metadata
//
// The spec says the 7 bits are "the encoding MIME Type Length in bytes".
// rsocket-java (CompositeMetadataCodec) writes length-1 and reads +1, so
// custom types of 1..128 bytes fit and 0 never occurs; rsocket-go does the
// same but refuses 128-byte types. We follow rsocket-java, the reference
// peer: a spec-literal reader would be off by one against every existing
// implementation.

// Entry is one composite metadata entry. Its slices point into the
// metadata it was read from.
type Entry struct {
	// WellKnown reports that the entry names its MIME type by id.
	WellKnown bool
	// ID is the well-known id (when WellKnown). It may be an id the table
	// does not define: such entries are returned, and a reader skips them.
	ID MIMEType
	// CustomMIME is the MIME string (when not WellKnown), 1..128 bytes.
	CustomMIME []byte
	// Metadata is the entry's content.
	Metadata []byte
}

// MIME returns the entry's MIME type as a string: the table's name for a
// well-known id ("" if the id is not in the table), else CustomMIME (this
// copies; compare with IsMIME to avoid that).
func (e Entry) MIME() string {
	if e.WellKnown {
		return e.ID.String()
	}
	return string(e.CustomMIME)
}

// IsMIME reports whether the entry's MIME type is name, whichever way it
// was encoded, without allocating.
func (e Entry) IsMIME(name string) bool {
	if e.WellKnown {
		return e.ID.String() == name && name != ""
	}
	return string(e.CustomMIME) == name // no allocation: the compiler compares in place
}

// CompositeIterator walks the entries of composite metadata without
// allocating:
//
//	it := extension.Composite(md)
//	for it.Next() {
//		e := it.Entry()
//		...
//	}
//	if err := it.Err(); err != nil { ... }
type CompositeIterator struct {
	b     []byte
	off   int
	entry Entry
	err   error
}

// Composite returns an iterator over the entries of composite metadata b.
func Composite(b []byte) CompositeIterator { return CompositeIterator{b: b} }

// Next advances to the next entry. It returns false at the end of the
// metadata or on a malformed entry (then Err is non-nil and the entries
// already returned stay valid).
func (it *CompositeIterator) Next() bool {
	if it.err != nil || it.off >= len(it.b) {
		return false
	}
	b, start := it.b, it.off
	off := start
	var e Entry
	c := b[off]
	off++
	if c&0x80 != 0 {
		e.WellKnown = true
		e.ID = MIMEType(c & 0x7F)
	} else {
		n := int(c) + 1
		if len(b)-off < n {
			return it.fail(start, fmt.Sprintf("MIME type of %d bytes, %d left", n, len(b)-off))
		}
		e.CustomMIME = b[off : off+n : off+n]
		off += n
	}
	if len(b)-off < 3 {
		return it.fail(start, "entry ends before its metadata length")
	}
	n := int(b[off])<<16 | int(b[off+1])<<8 | int(b[off+2])
	off += 3
	if len(b)-off < n {
		return it.fail(start, fmt.Sprintf("metadata length %d, %d bytes left", n, len(b)-off))
	}
	e.Metadata = b[off : off+n : off+n]
	it.off = off + n
	it.entry = e
	return true
}

func (it *CompositeIterator) fail(off int, detail string) bool {
	it.err = &MalformedError{Format: "composite metadata", Offset: off, Detail: detail}
	it.entry = Entry{}
	return false
}

// Entry returns the current entry (after Next returned true).
func (it *CompositeIterator) Entry() Entry { return it.entry }

// Err returns the error that stopped the iteration, nil at a clean end.
func (it *CompositeIterator) Err() error { return it.err }

// FindComposite returns the first entry of composite metadata b whose MIME
// type is name. ok is false if there is none; err reports malformed
// metadata met before it.
func FindComposite(b []byte, name string) (e Entry, ok bool, err error) {
	it := Composite(b)
	for it.Next() {
		if it.entry.IsMIME(name) {
			return it.entry, true, nil
		}
	}
	return Entry{}, false, it.Err()
}

// AppendCompositeEntry appends an entry for MIME type mime, encoded by id
// when mime is in the well-known table (as rsocket-java's
// encodeAndAddMetadataWithCompression does) and as a string otherwise.
func AppendCompositeEntry(dst []byte, mime string, metadata []byte) ([]byte, error) {
	if id, ok := LookupMIME(mime); ok {
		return AppendCompositeWellKnown(dst, id, metadata)
	}
	return AppendCompositeCustom(dst, mime, metadata)
}

// AppendCompositeWellKnown appends an entry with well-known id (0..0x7F).
func AppendCompositeWellKnown(dst []byte, id MIMEType, metadata []byte) ([]byte, error) {
	if id > MaxMIMEType {
		return dst, fmt.Errorf("rsocket: composite metadata MIME id 0x%x: %w (max 0x7f)", uint8(id), ErrTooLong)
	}
	if len(metadata) > maxUint24 {
		return dst, fmt.Errorf("rsocket: composite metadata entry of %d bytes: %w", len(metadata), ErrTooLong)
	}
	b := slices.Grow(dst, 4+len(metadata))
	b = append(b, 0x80|byte(id))
	b = append(b, byte(len(metadata)>>16), byte(len(metadata)>>8), byte(len(metadata)))
	return append(b, metadata...), nil
}

// AppendCompositeCustom appends an entry whose MIME type is written as a
// string (1..128 US-ASCII bytes), even if it is well known.
func AppendCompositeCustom(dst []byte, mime string, metadata []byte) ([]byte, error) {
	if err := checkTypeString("composite metadata MIME type", mime); err != nil {
		return dst, err
	}
	if len(metadata) > maxUint24 {
		return dst, fmt.Errorf("rsocket: composite metadata entry of %d bytes: %w", len(metadata), ErrTooLong)
	}
	b := slices.Grow(dst, 1+len(mime)+3+len(metadata))
	b = append(b, byte(len(mime)-1))
	b = append(b, mime...)
	b = append(b, byte(len(metadata)>>16), byte(len(metadata)>>8), byte(len(metadata)))
	return append(b, metadata...), nil
}

// checkTypeString checks a MIME or auth type string for the length-1
// encoding: 1..128 bytes, US-ASCII (rsocket-java refuses anything else).
func checkTypeString(what, s string) error {
	if len(s) == 0 {
		return fmt.Errorf("rsocket: %s: %w", what, ErrEmpty)
	}
	if len(s) > 128 {
		return fmt.Errorf("rsocket: %s of %d bytes: %w (max 128)", what, len(s), ErrTooLong)
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return fmt.Errorf("rsocket: %s %q: %w", what, s, ErrNotASCII)
		}
	}
	return nil
}
