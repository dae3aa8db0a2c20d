package diskstore

import "github.com/sluicehq/sluice/internal/xfer"

// DefaultBufferBytes is Options.BufferBytes's default: 32 blocks of
// blockSize, so 8 uploads at full speed (each pipelines nBlocks blocks
// through its hasher; more go on unbuffered), and 100 hostile uploads
// that each hold a block (a body reset, or trickling, mid-block) hold at
// most 32 MiB of blocks instead of 100 to 400 MiB (issue 23 item 6: 100
// POSTs reset mid-body took `xfer serve` to 258 MB RSS, 146 MB live).
const DefaultBufferBytes = 32 << 20

// bufferBudget is the upload buffer memory a store's uploads share, over
// every transport of its server: each block an upload fills, writes or
// hashes holds one token until it is hashed or dropped. An upload that
// finds none left does not allocate one: it writes and hashes each chunk
// (a body 64 KiB at a time) before it reads the next, so it reads only as
// fast as it writes, and it still reads, so it sees its client go (see
// Upload.block).
//
// The blocks are kept for reuse in free, at most as many as there are
// tokens, so that the resets of hostile clients make no garbage and the
// blocks that exist never exceed the budget (a sync.Pool kept up to twice
// as many alive across a collection); they go to the collector when no
// upload holds one (trim).
type bufferBudget struct {
	tokens chan struct{} // one per block out; its capacity is the budget
	free   chan []byte   // idle blocks
	stats  *xfer.Stats
}

func newBufferBudget(bytes int64, stats *xfer.Stats) *bufferBudget {
	n := max(bytes/blockSize, 1)
	return &bufferBudget{tokens: make(chan struct{}, n), free: make(chan []byte, n), stats: stats}
}

// tryGet returns an empty block when the budget has one.
func (b *bufferBudget) tryGet() ([]byte, bool) {
	select {
	case b.tokens <- struct{}{}:
	default:
		return nil, false
	}
	n := b.stats.BufferBytes.Add(blockSize)
	for p := b.stats.BufferPeak.Load(); n > p && !b.stats.BufferPeak.CompareAndSwap(p, n); p = b.stats.BufferPeak.Load() {
	}
	select {
	case buf := <-b.free:
		return buf[:0], true
	default:
		return make([]byte, 0, blockSize), true
	}
}

// put gives back a block from tryGet.
func (b *bufferBudget) put(buf []byte) {
	select {
	case b.free <- buf[:0]:
	default:
	}
	b.stats.BufferBytes.Add(-blockSize)
	<-b.tokens
}

// trim lets the collector have the idle blocks when no upload holds one:
// an idle server gives their memory back.
func (b *bufferBudget) trim() {
	if b.stats.BufferBytes.Load() != 0 {
		return
	}
	for {
		select {
		case <-b.free:
		default:
			return
		}
	}
}
