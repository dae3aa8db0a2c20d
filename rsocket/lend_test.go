package rsocket

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// The receive path hands the application the frame's bytes copied once
// (the machine lends them, conn.Config.LendFrames), reassembled payloads
// without a copy (conn.Event.Owned), and the send path queues a large
// frame in the machine's own buffer (Machine.TakeOut). Each is safe only
// if nothing reuses a buffer the application or the writer still reads:
// a channel echoes payloads of every size class through both ends, whole
// and fragmented, small ones batched with large ones, and each must come
// back as it was sent.
func TestLentAndAdoptedBuffersKeepPayloadsIntact(t *testing.T) {
	sizes := []int{0, 100, 600, 16 << 10, 70 << 10, 1 << 20, 3 << 20, 5, 256 << 10}
	for _, tr := range transports {
		for _, frameSize := range []int{frame.MaxFrameSize, 256 << 10} {
			t.Run(fmt.Sprintf("%s/frames-%d", tr, frameSize), func(t *testing.T) {
				c, _ := pair(t, tr, WithMaxFrameSize(frameSize))
				ch, err := c.RequestChannel(tctx(t), Payload{Data: []byte("first")}, 4)
				if err != nil {
					t.Fatal(err)
				}
				want := make([]Payload, 0, 3*len(sizes))
				for round := range 3 {
					for i, n := range sizes {
						p := Payload{Metadata: []byte(fmt.Sprintf("md-%d-%d", round, i)), Data: make([]byte, n)}
						for j := range p.Data {
							p.Data[j] = byte(j*7 + i + round)
						}
						want = append(want, p)
					}
				}
				go func() {
					for _, p := range want {
						if err := ch.Send(p); err != nil {
							t.Error(err)
							return
						}
					}
					ch.Complete()
				}()
				var got []Payload
				for {
					p, err := ch.Stream.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, p)
				}
				// Checked after all arrived: a payload aliasing a buffer
				// reused since would show the later frames' bytes now.
				if len(got) != len(want)+1 || string(got[0].Data) != "first" {
					t.Fatalf("got %d payloads, first %q; want %d", len(got), got[0].Data, len(want)+1)
				}
				for i, p := range want {
					g := got[i+1]
					if !bytes.Equal(g.Metadata, p.Metadata) || !bytes.Equal(g.Data, p.Data) {
						t.Fatalf("payload %d (%d bytes) came back as metadata %q and %d bytes of data, not as sent", i, len(p.Data), g.Metadata, len(g.Data))
					}
				}
			})
		}
	}
}
