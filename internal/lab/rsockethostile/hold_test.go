package rsockethostile_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/lab/hostile"
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
			addr, clientFirst, stop, err := hostile.ClosingServer(func(c net.Conn) bool { return readFrames(c, 1+frames) })
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			rep, err := rsockethostile.Run(context.Background(), rsockethostile.Config{URL: "tcp://" + addr,
				Mode: mode, Conns: conns, FrameSize: 1 << 10, Duration: time.Minute, MaxFrames: frames})
			if err != nil {
				t.Fatal(err)
			}
			if n := clientFirst(conns); n > 0 || rep.Closed != conns {
				t.Errorf("%+v: the client closed %d connections first, the server closed %d as the client saw it; want 0 and %d", rep, n, rep.Closed, conns)
			}
		})
	}
}

// readFrames reads n length-prefixed RSocket frames (TCP framing: a
// 24-bit length, then the frame); it reports whether the client closed its
// side first.
func readFrames(c net.Conn, n int) (eof bool) {
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
