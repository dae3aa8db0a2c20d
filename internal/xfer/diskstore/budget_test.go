package diskstore

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer/post"
	"github.com/sluicehq/sluice/internal/xfer/send"
)

// TestUploadBuffersWithinBudget: 16 uploads at once, four on each
// transport (gRPC, RSocket, tus, HTTP POST), through a store whose
// buffer budget is four blocks, one upload's worth at full speed: the
// blocks out never exceed the budget (without it, each upload took its
// own, up to 64 MiB here), and every upload lands whole with the right
// SHA-256.
func TestUploadBuffersWithinBudget(t *testing.T) {
	const budget = nBlocks * blockSize
	e := startEnv(t, Options{BufferBytes: budget})
	postURL := "http://" + e.Srv.Addrs.HTTP + "/post/"
	data := xfertest.RandBytes(4<<20+321, 30)
	src := xfertest.TempFile(t, data)
	want := sha256.Sum256(data)
	urls := e.URLs()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		tr := []string{"grpc", "rsocket", "tus", "http"}[i%4]
		name := fmt.Sprintf("f-%s-%d", tr, i)
		wg.Go(func() {
			var sum []byte
			var err error
			if tr == "http" {
				sum, err = post.Upload(xfertest.Ctx(t), http.DefaultClient, postURL+name, bytes.NewReader(data), int64(len(data)))
			} else {
				sum, err = send.File(xfertest.Ctx(t), urls[tr], src, send.Options{Name: name, StateDir: t.TempDir()})
			}
			if err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				return
			}
			if got, err := os.ReadFile(filepath.Join(e.Dir, name)); err != nil || !bytes.Equal(got, data) || !bytes.Equal(sum, want[:]) {
				errs <- fmt.Errorf("%s: landed differently (sum %x, %v)", name, sum, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := &e.Store.Stats
	if peak := st.BufferPeak.Load(); peak > budget || peak == 0 {
		t.Errorf("upload buffers peaked at %d bytes, the budget is %d", peak, budget)
	}
	if n := st.BufferBytes.Load(); n != 0 {
		t.Errorf("%d bytes of upload buffers still out after every upload ended", n)
	}
	t.Logf("peak %d bytes, %d writes without a block", st.BufferPeak.Load(), st.BufferMisses.Load())
}

// TestSpentBudgetDoesNotWait: clients whose bodies trickle (half a
// block, then a byte at a time, as `sluice hostile --mode never-reads`
// does) hold every block of the budget; a well-behaved upload does not
// wait for them (for as long as they trickle, then the idle timeout): it
// goes on without a block, each 64 KiB of its body written and hashed
// before the next is read, and lands whole.
func TestSpentBudgetDoesNotWait(t *testing.T) {
	const tricklers = 3
	e := startEnv(t, Options{BufferBytes: 2 * blockSize}) // fewer blocks than tricklers
	addr := e.Srv.Addrs.HTTP
	stop := make(chan struct{})
	var exhausted atomic.Int64 // tricklers that sent their last byte
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	for i := range tricklers {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		wg.Go(func() {
			fmt.Fprintf(conn, "POST /post/trickle-%d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", i, 4<<20)
			if _, err := conn.Write(make([]byte, blockSize/2)); err != nil {
				return
			}
			// Bounded: at most 30,000 bytes, a byte every millisecond.
			defer exhausted.Add(1)
			for range 30_000 {
				select {
				case <-stop:
					exhausted.Add(-1) // stopped by the test, not exhausted
					return
				case <-time.After(time.Millisecond):
				}
				if _, err := conn.Write([]byte{'x'}); err != nil {
					return
				}
			}
		})
	}
	// The tricklers hold the budget's blocks.
	for deadline := time.Now().Add(time.Minute); e.Store.Stats.BufferBytes.Load() < 2*blockSize; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the trickling bodies never took the budget's blocks")
		}
	}
	data := xfertest.RandBytes(3<<20+5, 31)
	sum, err := post.Upload(xfertest.Ctx(t), http.DefaultClient, "http://"+addr+"/post/good", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(data); !bytes.Equal(sum, want[:]) {
		t.Fatalf("sum %x, want %x", sum, want)
	}
	if got, err := os.ReadFile(filepath.Join(e.Dir, "good")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("DIR/good differs (%v)", err)
	}
	if n := exhausted.Load(); n > 0 {
		t.Fatalf("the upload completed only after %d of the %d trickling bodies had sent all they would", n, tricklers)
	}
}
