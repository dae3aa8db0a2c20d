package extension

import (
	"fmt"
	"slices"
)

// Routing metadata (Extensions/Routing.md, MIME message/x.rsocket.routing.v0)
// is a sequence of tags, each a 1-byte length (0..255) and that many bytes
// of UTF-8. Unlike MIME types, the length is written as is (no -1), in the
// spec and in rsocket-java's TaggingMetadataCodec alike.

// RoutingIterator walks the tags of routing metadata without allocating:
//
//	it := extension.Routing(md)
//	for it.Next() {
//		route := it.Tag()
//	}
//	err := it.Err()
type RoutingIterator struct {
	b   []byte
	off int
	tag []byte
	err error
}

// Routing returns an iterator over the tags of routing metadata b.
func Routing(b []byte) RoutingIterator { return RoutingIterator{b: b} }

// Next advances to the next tag; false at the end or on a tag that runs
// past the metadata (then Err is non-nil).
func (it *RoutingIterator) Next() bool {
	if it.err != nil || it.off >= len(it.b) {
		return false
	}
	n := int(it.b[it.off])
	start := it.off + 1
	if len(it.b)-start < n {
		it.err = &MalformedError{Format: "routing", Offset: it.off,
			Detail: fmt.Sprintf("tag of %d bytes, %d left", n, len(it.b)-start)}
		it.tag = nil
		return false
	}
	it.tag = it.b[start : start+n : start+n]
	it.off = start + n
	return true
}

// Tag returns the current tag; it points into the metadata.
func (it *RoutingIterator) Tag() []byte { return it.tag }

// Err returns the error that stopped the iteration, nil at a clean end.
func (it *RoutingIterator) Err() error { return it.err }

// FirstRoute returns the first tag of routing metadata b, the route in the
// common single-tag use (Spring's @MessageMapping). ok is false if there is
// no tag.
func FirstRoute(b []byte) (tag []byte, ok bool, err error) {
	it := Routing(b)
	if it.Next() {
		return it.Tag(), true, nil
	}
	return nil, false, it.Err()
}

// AppendRoutingTag appends one tag (at most 255 bytes).
func AppendRoutingTag(dst []byte, tag string) ([]byte, error) {
	if len(tag) > 255 {
		return dst, fmt.Errorf("rsocket: routing tag of %d bytes: %w (max 255)", len(tag), ErrTooLong)
	}
	b := slices.Grow(dst, 1+len(tag))
	b = append(b, byte(len(tag)))
	return append(b, tag...), nil
}

// AppendRouting appends the tags in order. On error dst is returned as it
// was before the call.
func AppendRouting(dst []byte, tags ...string) ([]byte, error) {
	b := dst
	for _, t := range tags {
		var err error
		if b, err = AppendRoutingTag(b, t); err != nil {
			return dst, err
		}
	}
	return b, nil
}
