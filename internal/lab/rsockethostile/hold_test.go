package rsockethostile_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/lab/rsockethostile"
)

// TestFloodsHoldTheConnection: a flood that has sent its MaxFrames keeps
// its connection, reading nothing, so what the server queued for it is
// not freed by the client going: a server that closes the connection
// after reading SETUP and every frame is seen closing it (the client's
// next KEEPALIVE fails). Before, the client closed it itself once its
// frames were sent.
func TestFloodsHoldTheConnection(t *testing.T) {
	const conns, frames = 2, 5
	for _, mode := range []rsockethostile.Mode{rsockethostile.KeepaliveFlood, rsockethostile.RequestFlood, rsockethostile.FNFFlood} {
		t.Run(string(mode), func(t *testing.T) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer lis.Close()
			eofs := make(chan bool, conns)
			go func() {
				for {
					c, err := lis.Accept()
					if err != nil {
						return
					}
					go func() { eofs <- readFramesThenClose(c, 1+frames) }()
				}
			}()
			rep, err := rsockethostile.Run(context.Background(), rsockethostile.Config{URL: "tcp://" + lis.Addr().String(),
				Mode: mode, Conns: conns, FrameSize: 1 << 10, Duration: time.Minute, MaxFrames: frames})
			if err != nil {
				t.Fatal(err)
			}
			for range conns {
				if <-eofs {
					t.Errorf("the client closed its connection before the server did")
				}
			}
			if rep.Closed != conns {
				t.Errorf("%+v: the server closed %d of %d connections as seen by the client, want all", rep, rep.Closed, conns)
			}
		})
	}
}

// readFramesThenClose reads n length-prefixed RSocket frames (TCP
// framing: a 24-bit length, then the frame), then closes c; it reports
// whether the client closed its side first.
func readFramesThenClose(c net.Conn, n int) (eof bool) {
	defer c.Close()
	var head [3]byte
	for range n {
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return true
		}
		size := int(head[0])<<16 | int(head[1])<<8 | int(head[2])
		if _, err := io.CopyN(io.Discard, c, int64(size)); err != nil {
			return true
		}
	}
	return false
}
