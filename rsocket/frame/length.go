package frame

import (
	"fmt"
	"io"
)

// Byte-stream transports (TCP, HTTP/2 streams) put a 24-bit big-endian
// length before each frame (Protocol.md "Framing Format"); message
// transports (WebSocket) do not. These helpers keep that prefix out of the
// frame codec so the same frames serve both.

// AppendLengthPrefix appends the 3-byte length prefix for a frame of n bytes.
func AppendLengthPrefix(dst []byte, n int) ([]byte, error) {
	if n < 0 || n > MaxFrameSize {
		return dst, fmt.Errorf("rsocket: length prefix for %d bytes: %w", n, ErrFrameTooLarge)
	}
	return appendUint24(dst, n), nil
}

// ReserveLengthPrefix appends 3 placeholder bytes and returns where they
// start, for SetLengthPrefix to fill in once the frame after them has been
// appended. This avoids computing a frame's size twice or copying it:
//
//	at := len(buf)
//	buf = frame.ReserveLengthPrefix(buf)
//	buf, err = frame.AppendPayload(buf, id, frame.FlagNext, md, data)
//	err = frame.SetLengthPrefix(buf, at)
func ReserveLengthPrefix(dst []byte) []byte {
	return append(dst, 0, 0, 0)
}

// SetLengthPrefix writes into b[at:at+3] the length of b[at+3:], the frame
// appended after ReserveLengthPrefix.
func SetLengthPrefix(b []byte, at int) error {
	if at < 0 || at > len(b)-LengthPrefixSize {
		return fmt.Errorf("rsocket: length prefix at %d outside a buffer of %d bytes: %w", at, len(b), ErrTruncated)
	}
	n := len(b) - at - LengthPrefixSize
	if n > MaxFrameSize {
		return fmt.Errorf("rsocket: length prefix for %d bytes: %w", n, ErrFrameTooLarge)
	}
	b[at], b[at+1], b[at+2] = byte(n>>16), byte(n>>8), byte(n)
	return nil
}

// ReadLengthPrefixed reads one length-prefixed frame from r into buf and
// returns the frame (without its prefix). The frame aliases buf when buf has
// the capacity, so the call does not allocate; pass the returned slice back
// as buf on the next call to reuse the memory (it is then overwritten).
// When buf is too small a larger buffer is allocated and returned.
//
// maxSize bounds the frame (MaxFrameSize if maxSize <= 0 or larger): a
// longer frame is rejected with ErrFrameTooLarge before any of its body is
// read, so a peer cannot make the reader allocate more than maxSize. After
// that error, or any other, the stream is out of sync: close the
// connection. A clean end of input before a frame gives io.EOF; an end
// inside a frame gives io.ErrUnexpectedEOF. The frame's own contents are not
// checked: parse it with ParseHeader or Validate.
//
// Wrap a net.Conn in a bufio.Reader so that small frames do not cost a
// system call each.
func ReadLengthPrefixed(r io.Reader, buf []byte, maxSize int) ([]byte, error) {
	if maxSize <= 0 || maxSize > MaxFrameSize {
		maxSize = MaxFrameSize
	}
	if cap(buf) < LengthPrefixSize {
		buf = make([]byte, 0, 4096)
	}
	// The prefix is read into buf itself: a local array would escape to the
	// heap through the io.Reader interface call.
	p := buf[:LengthPrefixSize]
	if _, err := io.ReadFull(r, p); err != nil {
		return buf[:0], err
	}
	n := int(p[0])<<16 | int(p[1])<<8 | int(p[2])
	if n > maxSize {
		return buf[:0], fmt.Errorf("rsocket: frame of %d bytes, limit %d: %w", n, maxSize, ErrFrameTooLarge)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return buf[:0], err
	}
	return buf, nil
}
