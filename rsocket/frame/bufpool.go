package frame

import (
	"math/bits"
	"sync"
)

// Buffers for large frames, pooled by size class and shared by the
// connections of a process: the driver reads large frames into them and
// the connection state machine (rsocket/conn) encodes and copies large
// payloads in them, giving each back once the frame is processed. A flood
// of 1 MiB frames otherwise allocates several fresh megabytes per frame,
// and the collector's headroom doubles that garbage (docs/rsocket.md,
// "Hostile clients").
//
// Classes run from 64 KiB to 16 MiB (a frame's limit), eight a doubling,
// so a buffer wastes at most an eighth of itself (a 1 MiB payload's frame
// takes 1.125 MiB).
const (
	minBufShift  = 16 // 64 KiB
	maxBufShift  = 24 // 16 MiB
	bufsPerDbl   = 8
	numBufClass  = (maxBufShift-minBufShift)*bufsPerDbl + 1
	MinPooledBuf = 1 << minBufShift // the smallest pooled buffer
)

var bufPools = func() (p [numBufClass]sync.Pool) {
	for i := range p {
		p[i].New = func() any { return new([]byte) } // sized by GetBuf on first use
	}
	return
}()

// BufClass returns the class of the smallest pooled buffer holding n
// bytes and its size; -1 beyond the largest.
func BufClass(n int) (class, size int) {
	if n <= 1<<minBufShift {
		return 0, 1 << minBufShift
	}
	if n > 1<<maxBufShift {
		return -1, 0
	}
	k := bits.Len(uint(n-1)) - 1 // 2^k < n <= 2^(k+1)
	step := 1 << (k - 3)
	i := (n - 1<<k + step - 1) / step // 1..8
	return (k-minBufShift)*bufsPerDbl + i, 1<<k + i*step
}

// GetBuf returns an empty buffer of at least n bytes: a pooled one of n's
// class, or a plain one beyond the largest class.
func GetBuf(n int) []byte {
	cls, size := BufClass(n)
	if cls < 0 {
		return make([]byte, 0, n)
	}
	p := bufPools[cls].Get().(*[]byte)
	b := *p
	if b == nil {
		b = make([]byte, size)
	}
	*p = nil
	boxes.Put(p)
	return b[:0]
}

// PutBuf gives b back for reuse: nothing may use it after. Buffers whose
// capacity is not exactly a class's size are left to the collector.
func PutBuf(b []byte) {
	cls, size := BufClass(cap(b))
	if cls < 0 || size != cap(b) {
		return
	}
	p := boxes.Get().(*[]byte)
	*p = b[:cap(b)]
	bufPools[cls].Put(p)
}

// boxes recycles the pointers the pools hold, so that giving a buffer
// back allocates nothing.
var boxes = sync.Pool{New: func() any { return new([]byte) }}
