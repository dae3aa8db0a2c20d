package grpcxfer

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// dirtyPool is the buffer pool of both ends' gRPC transports: gRPC's
// default pool clears every buffer it hands out, over its whole capacity
// (a power-of-two tier: a 256 KiB chunk's message takes a 512 KiB
// buffer), and an upload fills every buffer it gets whole (a DATA frame
// read in full, a message marshalled into it), so the clearing was pure
// cost: a tenth of an upload's CPU (docs/xfer.md, "Where an upload's CPU
// goes"). Buffers are pooled by power-of-two capacity, 256 B to 16 MiB
// (the largest message is xfer.MaxChunk and its framing).
type dirtyPool struct {
	tiers [maxTier + 1]sync.Pool
}

const minTier, maxTier = 8, 24

var _ mem.BufferPool = (*dirtyPool)(nil)

// sharedPool is the one pool of the process, shared by its connections.
var sharedPool = &dirtyPool{}

func tierOf(n int) int { return max(minTier, bits.Len(uint(max(n, 1)-1))) }

// Get returns a buffer of length n, with whatever bytes it held before.
func (p *dirtyPool) Get(n int) *[]byte {
	t := tierOf(n)
	if t > maxTier {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.tiers[t].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<t)
	return &b
}

// Put gives b back, if its capacity is one of the pool's tiers.
func (p *dirtyPool) Put(b *[]byte) {
	c := cap(*b)
	t := bits.Len(uint(c)) - 1
	if t < minTier || t > maxTier || c != 1<<t {
		return
	}
	p.tiers[t].Put(b)
}
