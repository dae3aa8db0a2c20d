package xfer

import "sync"

// DefaultBufferBytes is Options.BufferBytes's default: 64 blocks of
// blockSize, so 16 uploads at full speed (each pipelines nBlocks blocks
// through its hasher), and 100 hostile uploads that each hold a block
// (a body reset, or trickling, mid-block) cost at most 64 MiB of buffers
// instead of 100 to 400 MiB (issue 23 item 6: 100 POSTs reset mid-body
// took `xfer serve` to 258 MB RSS).
const DefaultBufferBytes = 64 << 20

// bufferBudget is the upload buffer memory a store's uploads share, over
// every transport of its server: each block an upload fills, writes or
// hashes holds one token until it is hashed or dropped. An upload that
// finds none left waits (and so stops reading its body or stream: the
// transport's flow control and idle timeout take over) instead of
// allocating. The blocks themselves come from blockPool, so the resets
// of hostile clients reuse them instead of making garbage, and an idle
// server's collections give them back.
type bufferBudget struct {
	tokens chan struct{} // one per block out; its capacity is the budget
	stats  *Stats
}

var blockPool = sync.Pool{New: func() any { return make([]byte, blockSize) }}

func newBufferBudget(bytes int64, stats *Stats) *bufferBudget {
	return &bufferBudget{tokens: make(chan struct{}, max(bytes/blockSize, 1)), stats: stats}
}

// tryGet returns an empty block when the budget has one.
func (b *bufferBudget) tryGet() ([]byte, bool) {
	select {
	case b.tokens <- struct{}{}:
		return b.take(), true
	default:
		return nil, false
	}
}

// get returns an empty block, waiting for one when the budget is spent.
func (b *bufferBudget) get() []byte {
	if buf, ok := b.tryGet(); ok {
		return buf
	}
	b.stats.BufferWaits.Add(1)
	b.tokens <- struct{}{}
	return b.take()
}

func (b *bufferBudget) take() []byte {
	n := b.stats.BufferBytes.Add(blockSize)
	for p := b.stats.BufferPeak.Load(); n > p && !b.stats.BufferPeak.CompareAndSwap(p, n); p = b.stats.BufferPeak.Load() {
	}
	return blockPool.Get().([]byte)[:0]
}

// put gives back a block from get or tryGet.
func (b *bufferBudget) put(buf []byte) {
	blockPool.Put(buf[:blockSize:blockSize])
	b.stats.BufferBytes.Add(-blockSize)
	<-b.tokens
}
