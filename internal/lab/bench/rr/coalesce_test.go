package rr

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// countingConn counts Write calls and holds the first one until released,
// so that frames queue behind it deterministically.
type countingConn struct {
	net.Conn
	mu      sync.Mutex
	writes  int
	entered chan struct{}
	release chan struct{}
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	first := c.writes == 1
	c.mu.Unlock()
	if first {
		close(c.entered)
		<-c.release
	}
	return c.Conn.Write(b)
}

// The tcp limit's client puts every frame queued during a write into the
// next single write: 1 frame, then 99 queued behind it, make 2 writes,
// and every frame arrives whole and in order.
func TestCoalescerOneWriteForEverythingQueued(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	cc := &countingConn{Conn: a, entered: make(chan struct{}), release: make(chan struct{})}
	w := newCoalescer(cc)
	defer a.Close()
	got := make(chan []uint32, 1)
	go func() {
		var ids []uint32
		var hdr [4]byte
		for len(ids) < 100 {
			if _, err := io.ReadFull(b, hdr[:]); err != nil {
				break
			}
			body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
			if _, err := io.ReadFull(b, body); err != nil {
				break
			}
			ids = append(ids, binary.BigEndian.Uint32(body))
		}
		got <- ids
	}()
	frame := func(i uint32) { w.frame(binary.BigEndian.AppendUint32(nil, i), nil) }
	// The first caller becomes the writer and is held in its write.
	go frame(0)
	select {
	case <-cc.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the writer never wrote")
	}
	for i := uint32(1); i < 100; i++ {
		frame(i)
	}
	close(cc.release)
	var ids []uint32
	select {
	case ids = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("frames never arrived")
	}
	for i, id := range ids {
		if id != uint32(i) {
			t.Fatalf("frame %d carries %d", i, id)
		}
	}
	if len(ids) != 100 {
		t.Fatalf("%d frames arrived, want 100", len(ids))
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.writes != 2 {
		t.Fatalf("%d writes for 1 frame and 99 queued behind it, want 2", cc.writes)
	}
}
