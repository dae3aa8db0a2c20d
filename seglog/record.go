package seglog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

const (
	headerSize    = 20
	formatVersion = 1
	typeData      = 1
	// typeGap marks offsets that hold no record: Repair writes one where
	// damaged records were quarantined, so the records after the damage keep
	// their offsets. Its body is the uint64 count of offsets it covers,
	// starting at its own offset.
	typeGap = 2
	gapBody = 8
	// MaxRecordLimit is the largest body a record can have in any
	// configuration: positions inside a segment are stored as uint32.
	MaxRecordLimit = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameSize is the number of bytes a record with a body of n bytes occupies.
func frameSize(n int) int { return (headerSize + n + 7) &^ 7 }

// FrameSize is the number of bytes a record of n bytes takes in a segment
// (header and padding included), for callers that account disk usage.
func FrameSize(n int) int { return frameSize(n) }

// appendRecord appends the frame of one record to dst.
func appendRecord(dst []byte, offset uint64, body []byte) []byte {
	return appendRecordParts(dst, offset, body, nil)
}

// appendRecordParts appends the frame of the record head followed by body.
func appendRecordParts(dst []byte, offset uint64, head, body []byte) []byte {
	start := len(dst)
	size := frameSize(len(head) + len(body))
	dst = grow(dst, size)
	frame := dst[start : start+size]
	binary.LittleEndian.PutUint32(frame[0:4], uint32(len(head)+len(body)))
	frame[4] = formatVersion
	frame[5] = typeData
	frame[6], frame[7] = 0, 0
	binary.LittleEndian.PutUint64(frame[8:16], offset)
	crc := crc32.Update(0, castagnoli, frame[0:16])
	crc = crc32.Update(crc, castagnoli, head)
	crc = crc32.Update(crc, castagnoli, body)
	binary.LittleEndian.PutUint32(frame[16:20], crc)
	n := copy(frame[headerSize:], head)
	n += copy(frame[headerSize+n:], body)
	clear(frame[headerSize+n:])
	return dst
}

// appendFrameHeader appends the header of the frame of head+body at
// offset, checksum included, but neither head nor body: the caller puts
// them (or points the write at them) and then the padding (framePadding).
func appendFrameHeader(dst []byte, offset uint64, head, body []byte) []byte {
	start := len(dst)
	dst = grow(dst, headerSize)
	frame := dst[start:]
	binary.LittleEndian.PutUint32(frame[0:4], uint32(len(head)+len(body)))
	frame[4] = formatVersion
	frame[5] = typeData
	frame[6], frame[7] = 0, 0
	binary.LittleEndian.PutUint64(frame[8:16], offset)
	crc := crc32.Update(0, castagnoli, frame[0:16])
	crc = crc32.Update(crc, castagnoli, head)
	crc = crc32.Update(crc, castagnoli, body)
	binary.LittleEndian.PutUint32(frame[16:20], crc)
	return dst
}

// framePadding is the number of zero bytes after a body of n bytes.
func framePadding(n int) int { return frameSize(n) - headerSize - n }

// grow extends b by n bytes, reallocating geometrically when needed.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// Decoding outcomes that recovery must tell apart.
var (
	// errShort: the buffer ends inside the record (a partial write, or the
	// caller must read more).
	errShort = errors.New("record extends past the end of the data")
	// errZero: an all-zero header, i.e. space that was never written.
	errZero = errors.New("zero header: no record here")
	// errChecksum: the CRC does not match the header and body.
	errChecksum = errors.New("checksum mismatch")
	// errHeader: an impossible header (version, type, reserved bits, length).
	errHeader = errors.New("malformed record header")
)

// appendGap appends a gap frame covering count offsets from offset.
func appendGap(dst []byte, offset, count uint64) []byte {
	var body [gapBody]byte
	binary.LittleEndian.PutUint64(body[:], count)
	start := len(dst)
	dst = appendRecord(dst, offset, body[:])
	dst[start+5] = typeGap
	crc := crc32.Update(0, castagnoli, dst[start:start+16])
	crc = crc32.Update(crc, castagnoli, body[:])
	binary.LittleEndian.PutUint32(dst[start+16:start+20], crc)
	return dst
}

// frame is one decoded frame: a data record, or a gap left by Repair.
type frame struct {
	offset uint64
	body   []byte // data records only; aliases the input
	size   int    // bytes the frame occupies
	gap    uint64 // offsets a gap frame covers; 0 for a data record
}

// end is the offset after the frame: the next frame must carry it.
func (f frame) end() uint64 {
	if f.gap > 0 {
		return f.offset + f.gap
	}
	return f.offset + 1
}

// decodeRecord decodes the data record at the start of buf. It returns the
// record's offset, its body (aliasing buf) and its frame size. A gap frame
// is an error here; readers of a log use decodeFrame.
func decodeRecord(buf []byte, maxBody int) (offset uint64, body []byte, size int, err error) {
	f, err := decodeFrame(buf, maxBody)
	if err == nil && f.gap > 0 {
		return 0, nil, 0, fmt.Errorf("%w: gap frame", errHeader)
	}
	return f.offset, f.body, f.size, err
}

// decodeFrame decodes the frame at the start of buf. maxBody bounds the
// length field so a corrupt length cannot make a caller allocate or read
// gigabytes. Any input gives an error or a frame, never a panic.
func decodeFrame(buf []byte, maxBody int) (frame, error) {
	if len(buf) < headerSize {
		if allZero(buf) && len(buf) > 0 {
			return frame{}, errZero
		}
		return frame{}, errShort
	}
	n := binary.LittleEndian.Uint32(buf[0:4])
	if n == 0 && allZero(buf[:headerSize]) {
		return frame{}, errZero
	}
	if buf[4] != formatVersion {
		return frame{}, fmt.Errorf("%w: unknown format version %d", errHeader, buf[4])
	}
	typ := buf[5]
	if (typ != typeData && typ != typeGap) || buf[6] != 0 || buf[7] != 0 {
		return frame{}, fmt.Errorf("%w: type %d, reserved %#x", errHeader, buf[5], buf[6:8])
	}
	if typ == typeGap && n != gapBody {
		return frame{}, fmt.Errorf("%w: gap frame with a %d-byte body", errHeader, n)
	}
	if uint64(n) > uint64(maxBody) && typ == typeData {
		return frame{}, fmt.Errorf("%w: length %d exceeds limit %d", errHeader, n, maxBody)
	}
	size := frameSize(int(n))
	if len(buf) < size {
		return frame{}, errShort
	}
	body := buf[headerSize : headerSize+int(n)]
	crc := crc32.Update(0, castagnoli, buf[0:16])
	crc = crc32.Update(crc, castagnoli, body)
	if crc != binary.LittleEndian.Uint32(buf[16:20]) && !mutationSkipCRC {
		return frame{}, errChecksum
	}
	if !allZero(buf[headerSize+int(n) : size]) {
		// Padding is outside the checksum; requiring zeros there means
		// every byte of a frame is verified.
		return frame{}, fmt.Errorf("%w: non-zero padding", errHeader)
	}
	f := frame{offset: binary.LittleEndian.Uint64(buf[8:16]), body: body, size: size}
	if typ == typeGap {
		f.body = nil
		f.gap = binary.LittleEndian.Uint64(body)
		if f.gap == 0 || f.offset+f.gap < f.offset {
			return frame{}, fmt.Errorf("%w: gap of %d offsets from %d", errHeader, f.gap, f.offset)
		}
	}
	return f, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
