package sink

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
)

// TestFollowersRSS measures the resident memory of a sink process serving
// many following consumers, each on its own connection. It is a
// measurement, not a check: it runs only with SLUICE_RSS_BIN set to a
// sluice binary, and logs the numbers.
//
//	go build -o /tmp/sluice ./cmd/sluice
//	SLUICE_RSS_BIN=/tmp/sluice SLUICE_RSS_ARGS="--max-conns-per-peer 1000" \
//	    go test -run TestFollowersRSS -v ./internal/sink/
//
// 200 followers of a 32 MB store: 855 MB (4.2 MB per follower) before
// this change, 268 MB (1.25 MB) after: read chunks shared and dropped
// while waiting, and gRPC buffers sized to the message (grpccodec.go).
// Issue 23 (--max-streams-per-conn 256), 256 followers: one connection
// each, 342 MB idle, 391 MB woken (1.45 MB per follower); all on one
// connection (SLUICE_RSS_ONE_CONN=1), 307 MB idle, 402 MB woken (1.48 MB):
// the same, so more streams per connection add no memory; the read chunks
// are 256 KiB each then (64 MiB over all), the rest is gRPC's and the
// runtime's (in-process heap in use: 0.08 MB per idle follower,
// TestFollowersHeap).
func TestFollowersRSS(t *testing.T) {
	bin := os.Getenv("SLUICE_RSS_BIN")
	if bin == "" {
		t.Skip("set SLUICE_RSS_BIN to a sluice binary to measure")
	}
	followers := 200
	if n, err := strconv.Atoi(os.Getenv("SLUICE_RSS_FOLLOWERS")); err == nil {
		followers = n
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	args := []string{"sink", "--listen", addr, "--data", filepath.Join(t.TempDir(), "data"), "--log-level", "warn"}
	if extra := os.Getenv("SLUICE_RSS_ARGS"); extra != "" {
		args = append(args, strings.Fields(extra)...)
	}
	var cmd *exec.Cmd
	start := func() {
		cmd = exec.Command(bin, args...)
		cmd.Stderr = os.Stderr
		cmd.Env = append(os.Environ(), os.Getenv("SLUICE_RSS_ENV"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	start()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	dial := func() *grpc.ClientConn {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		return cc
	}
	rss := func() int {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				n, _ := strconv.Atoi(strings.Fields(l)[1])
				return n / 1024
			}
		}
		return 0
	}
	// Store 32 MB: 512 messages of 64 KiB.
	cc := dial()
	var stream grpc.BidiStreamingClient[sluicev1.Request, sluicev1.Response]
	for deadline := time.Now().Add(30 * time.Second); ; {
		stream, err = sluicev1.NewSinkClient(cc).Send(context.Background())
		if err == nil {
			err = stream.Send(sinkclient.Hello("rss"))
		}
		if err == nil {
			_, err = stream.Recv()
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sink did not come up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	rec := strings.Repeat("0123456789abcdef", 4<<10)
	const msgs = 512
	for id := range uint64(msgs) {
		if err := stream.Send(sinkclient.PlainRequest(id, rec)); err != nil {
			t.Fatal(err)
		}
	}
	for acked := 0; acked < msgs; {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, rg := range r.GetAck().GetRanges() {
			acked += int(rg.Last - rg.First + 1)
		}
	}
	// Restart the sink on the same data, so that the heap goal left by
	// ingesting does not hide what the followers cost.
	cc.Close()
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	start()
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sink did not come back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cc = dial()
	defer cc.Close()
	if stream, err = sluicev1.NewSinkClient(cc).Send(context.Background()); err == nil {
		err = stream.Send(sinkclient.Hello("rss"))
	}
	if err == nil {
		_, err = stream.Recv()
	}
	if err != nil {
		t.Fatal(err)
	}
	base := rss()
	caught := make(chan error, followers)
	// SLUICE_RSS_ONE_CONN=1 puts every follower on one connection (the
	// default --max-streams-per-conn, 256, lets them all run).
	var conns []*grpc.ClientConn
	one := os.Getenv("SLUICE_RSS_ONE_CONN") == "1"
	for range followers {
		if !one || len(conns) == 0 {
			conns = append(conns, dial())
		}
		go sinkclient.Follow(context.Background(), conns[len(conns)-1], caught, nil)
	}
	ok := 0
	for range followers {
		if err := <-caught; err == nil {
			ok++
		} else {
			t.Logf("follower: %v", err)
		}
	}
	// Let the sink settle: SLUICE_RSS_SETTLE (e.g. 130s) lets the Go
	// runtime's periodic GC (every 2 minutes) and scavenger run, so that
	// garbage left from catching up stops counting.
	settle := 2 * time.Second
	if d, err := time.ParseDuration(os.Getenv("SLUICE_RSS_SETTLE")); err == nil {
		settle = d
	}
	time.Sleep(settle)
	idle := rss()
	// New messages wake every follower.
	for id := uint64(msgs); id < msgs+16; id++ {
		stream.Send(sinkclient.PlainRequest(id, rec))
	}
	time.Sleep(2 * time.Second)
	woken := rss()
	t.Logf("%d followers caught up (of %d): sink RSS %d MB before them, %d MB with them idle at the end, %d MB after 16 more messages; %.2f MB per follower",
		ok, followers, base, idle, woken, float64(max(idle, woken)-base)/float64(max(ok, 1)))
	for _, c := range conns {
		c.Close()
	}
}
