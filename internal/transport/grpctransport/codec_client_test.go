package grpctransport

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/protocol"
)

// TestClientCodecOwned: an owned Request encodes to exactly proto.Marshal's
// bytes, decodes with the standard decoder to the same payload, and the
// record is given back once, only when gRPC frees the encoded buffers
// (large payloads), or at once (small ones, which are copied).
func TestClientCodecOwned(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 8192) // 128 KiB
	for _, tc := range []struct {
		name string
		req  *sluicev1.Request
		held bool // the payload is referenced, not copied
	}{
		{"plain", &sluicev1.Request{Version: 1, MessageId: 7, RecordCount: 3, Payload: &sluicev1.Request_Plain{Plain: big}}, true},
		{"zstd", &sluicev1.Request{Version: 1, MessageId: 1 << 40, RecordCount: 1 << 20, Payload: &sluicev1.Request_Zstd{Zstd: big}}, true},
		{"kafka_zstd", &sluicev1.Request{Version: 1, MessageId: 9, RecordCount: 40, Payload: &sluicev1.Request_KafkaZstd{KafkaZstd: big}}, true},
		{"zero fields", &sluicev1.Request{Payload: &sluicev1.Request_Plain{Plain: big}}, true},
		{"small", &sluicev1.Request{Version: 1, MessageId: 2, RecordCount: 1, Payload: &sluicev1.Request_Plain{Plain: []byte("abc")}}, false},
		{"dict", &sluicev1.Request{Version: 1, MessageId: 3, RecordCount: 1, Payload: &sluicev1.Request_ZstdDict{ZstdDict: &sluicev1.ZstdDict{DictionaryId: 5, Data: big}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := proto.Marshal(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			rec := &[]byte{}
			var puts atomic.Int32
			put := func(b *[]byte) {
				if b != rec {
					t.Errorf("put got another buffer")
				}
				puts.Add(1)
			}
			bs, err := ClientCodec().Marshal(&ownedRequest{req: tc.req, rec: rec, put: put})
			if err != nil {
				t.Fatal(err)
			}
			got := bs.Materialize()
			if !bytes.Equal(got, want) {
				t.Fatalf("encoded %d bytes differ from proto.Marshal's %d", len(got), len(want))
			}
			if tc.held {
				if len(bs) != 2 || &bs[1].ReadOnlyData()[0] != &big[0] {
					t.Fatalf("payload copied: %d buffers", len(bs))
				}
				if n := puts.Load(); n != 0 {
					t.Fatalf("record released %d times before gRPC freed it", n)
				}
			}
			bs.Free()
			if n := puts.Load(); n != 1 {
				t.Fatalf("record released %d times, want once", n)
			}
			var back sluicev1.Request
			if err := proto.Unmarshal(got, &back); err != nil || !proto.Equal(&back, tc.req) {
				t.Fatalf("round trip: %v", err)
			}
		})
	}
}

// recvSvc hands every message the sink receives to got (copied: the frame
// is reused by the next Recv).
type recvSvc struct{ got chan []byte }

func (s recvSvc) ServeSend(c protocol.Conn) error {
	for {
		f, err := c.Recv()
		if err != nil {
			return nil
		}
		switch f := f.(type) {
		case *protocol.Hello:
			c.Send(&protocol.Welcome{Version: protocol.Version})
		case *protocol.Message:
			s.got <- append([]byte(nil), f.Payload...)
		}
	}
}

func (recvSvc) ServeRead(protocol.Conn) error { return nil }

// TestSendOwned: over a real gRPC stream, the sink receives the owned
// payloads byte for byte, and every record comes back to the sender.
func TestSendOwned(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	svc := recvSvc{got: make(chan []byte, 16)}
	Register(s, svc)
	go s.Serve(lis)
	defer s.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := NewDialer(cc).Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(nil)
	if err := c.Send(&protocol.Hello{AgentID: "a", Version: protocol.Version}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recv(); err != nil {
		t.Fatal(err)
	}
	back := make(chan *[]byte, 8)
	for i := range 8 {
		b := bytes.Repeat([]byte{byte(i)}, 100000+i)
		rec := &b
		m := &protocol.Message{ID: uint64(i + 1), Records: 1, Codec: protocol.CodecPlain, Payload: b[:len(b):len(b)]}
		if err := c.(*sendClient).SendOwned(m, rec, func(r *[]byte) { back <- r }); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 8 {
		select {
		case p := <-svc.got:
			if len(p) != 100000+i || p[0] != byte(i) || p[len(p)-1] != byte(i) {
				t.Fatalf("message %d: %d bytes, first %d", i, len(p), p[0])
			}
		case <-ctx.Done():
			t.Fatal("sink did not receive every message")
		}
	}
	for range 8 {
		select {
		case <-back:
		case <-ctx.Done():
			t.Fatal("not every record was given back")
		}
	}
}
