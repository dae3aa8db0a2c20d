package sink

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
)

// TestFollowersHeap measures the Go heap a sink holds for following
// consumers, each on its own connection, in process (after a GC, so
// garbage does not count; the clients' side of the connections is
// included, about the same per connection). A measurement, not a check:
// it runs only with SLUICE_HEAP_FOLLOWERS=N. Measured with 200 followers
// of a 32 MB store: 1.05 MB per idle follower before read chunks were
// shared and dropped while waiting, 0.09 MB after.
func TestFollowersHeap(t *testing.T) {
	followers, _ := strconv.Atoi(os.Getenv("SLUICE_HEAP_FOLLOWERS"))
	if followers == 0 {
		t.Skip("set SLUICE_HEAP_FOLLOWERS=200 to measure")
	}
	h := newHarness(t, func(c *Config) { c.MaxConnsPerPeer, c.MaxConsumers = followers+10, followers+10 })
	a := h.connect("heap")
	rec := strings.Repeat("0123456789abcdef", 4<<10)
	const msgs = 512
	var ids []uint64
	for id := range uint64(msgs) {
		a.Send(sinkclient.PlainRequest(id, rec))
		ids = append(ids, id)
	}
	a.Collect(ids...)
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse >> 20
	}
	base := heap()
	caught := make(chan error, followers)
	woke := make(chan struct{}, followers) // a follower got the last new message
	for range followers {
		cc, err := grpc.NewClient(h.cc.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go sinkclient.Follow(ctx, cc, caught, func(r *sluicev1.ReadResponse) {
			if r.GetMessage().GetMessageId() == msgs+15 {
				woke <- struct{}{}
			}
		})
	}
	for i := range followers {
		select {
		case err := <-caught:
			if err != nil {
				t.Fatalf("follower %d: %v", i, err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%d of %d followers caught up", i, followers)
		}
	}
	idle := heap()
	for id := uint64(msgs); id < msgs+16; id++ {
		a.Send(sinkclient.PlainRequest(id, rec))
	}
	a.Collect(msgs, msgs+15)
	for i := range followers { // every follower got them
		select {
		case <-woke:
		case <-time.After(60 * time.Second):
			t.Fatalf("%d of %d followers got the new messages", i, followers)
		}
	}
	woken := heap()
	t.Logf("%d followers: heap in use %d MB before them, %d MB with them caught up and idle, %d MB after 16 more messages: %.2f MB per follower (idle)",
		followers, base, idle, woken, float64(idle-base)/float64(followers))
}
