package frame

import (
	"math/bits"
	"sync"
	"sync/atomic"
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

// MaxPooledBytes bounds the free buffers the pool keeps, all classes and
// connections together; a buffer given back beyond it is left to the
// collector. A sync.Pool was used first: what it holds is live until two
// collections pass, so under a flood of 1 MiB frames the free buffers it
// kept were a fifth of the heap and no budget saw them (issue 22).
const MaxPooledBytes = 16 << 20

// freeList is one class's free buffers.
type freeList struct {
	mu   sync.Mutex
	bufs [][]byte
}

var (
	freeLists   [numBufClass]freeList
	pooledBytes atomic.Int64 // the capacity of every buffer in freeLists
)

// PooledBytes is the capacity of the free buffers the pool keeps now.
func PooledBytes() int64 { return pooledBytes.Load() }

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
	l := &freeLists[cls]
	l.mu.Lock()
	if k := len(l.bufs); k > 0 {
		b := l.bufs[k-1]
		l.bufs[k-1] = nil
		l.bufs = l.bufs[:k-1]
		l.mu.Unlock()
		pooledBytes.Add(-int64(size))
		return b[:0]
	}
	l.mu.Unlock()
	return make([]byte, 0, size)
}

// PutBuf gives b back for reuse: nothing may use it after. Buffers whose
// capacity is not exactly a class's size, and any beyond MaxPooledBytes,
// are left to the collector.
func PutBuf(b []byte) {
	cls, size := BufClass(cap(b))
	if cls < 0 || size != cap(b) {
		return
	}
	if pooledBytes.Add(int64(size)) > MaxPooledBytes {
		pooledBytes.Add(-int64(size))
		return
	}
	l := &freeLists[cls]
	l.mu.Lock()
	l.bufs = append(l.bufs, b[:0])
	l.mu.Unlock()
}
