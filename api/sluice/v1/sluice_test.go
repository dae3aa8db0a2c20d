package sluicev1_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
)

// roundTrip marshals m, unmarshals it into a new message of the same type
// and checks that nothing was lost.
func roundTrip[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	wire, err := proto.Marshal(m)
	if err != nil {
		t.Fatalf("Marshal(%v): %v", m, err)
	}
	got := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(wire, got); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if !proto.Equal(got, m) {
		t.Fatalf("round trip changed the message:\n got %v\nwant %v", got, m)
	}
	return got
}

func TestRequestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  *sluicev1.Request
		// check looks at the decoded oneof through the generated getters.
		check func(*sluicev1.Request) bool
	}{
		{
			name: "hello",
			req: &sluicev1.Request{Version: 1, Payload: &sluicev1.Request_Hello{Hello: &sluicev1.Hello{
				AgentId:         "agent-7",
				ProtocolVersion: 1,
				Codecs:          []sluicev1.Codec{sluicev1.Codec_CODEC_PLAIN, sluicev1.Codec_CODEC_ZSTD, sluicev1.Codec_CODEC_ZSTD_DICT},
				DictionaryIds:   []uint32{3, 9},
				Watermark:       41,
			}}},
			check: func(r *sluicev1.Request) bool {
				return r.GetHello().GetAgentId() == "agent-7" && len(r.GetHello().GetCodecs()) == 3
			},
		},
		{
			name: "plain",
			req: &sluicev1.Request{Version: 1, MessageId: 42, RecordCount: 2,
				Payload: &sluicev1.Request_Plain{Plain: []byte{0xB1, 0x01, 0x02, 0x01, 'a', 0x00}}},
			check: func(r *sluicev1.Request) bool { return len(r.GetPlain()) == 6 && r.GetMessageId() == 42 },
		},
		{
			name: "zstd",
			req: &sluicev1.Request{Version: 1, MessageId: 43, RecordCount: 100,
				Payload: &sluicev1.Request_Zstd{Zstd: []byte{0x28, 0xB5, 0x2F, 0xFD}}},
			check: func(r *sluicev1.Request) bool { return len(r.GetZstd()) == 4 && r.GetRecordCount() == 100 },
		},
		{
			name: "zstd_dict",
			req: &sluicev1.Request{Version: 1, MessageId: 1 << 40, RecordCount: 7,
				Payload: &sluicev1.Request_ZstdDict{ZstdDict: &sluicev1.ZstdDict{DictionaryId: 9, Data: []byte{0x28, 0xB5, 0x2F, 0xFD, 0x01}}}},
			check: func(r *sluicev1.Request) bool { return r.GetZstdDict().GetDictionaryId() == 9 },
		},
		{
			name: "dictionary",
			req: &sluicev1.Request{Version: 1,
				Payload: &sluicev1.Request_Dictionary{Dictionary: &sluicev1.Dictionary{Id: 9, Data: []byte{0x37, 0xA4, 0x30, 0xEC, 9, 0, 0, 0}}}},
			check: func(r *sluicev1.Request) bool { return r.GetDictionary().GetId() == 9 },
		},
		{
			// An empty plain batch body is still the plain case: proto3
			// oneof members keep their presence even when empty.
			name:  "plain empty bytes",
			req:   &sluicev1.Request{Version: 1, Payload: &sluicev1.Request_Plain{Plain: []byte{}}},
			check: func(r *sluicev1.Request) bool { _, ok := r.GetPayload().(*sluicev1.Request_Plain); return ok },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := roundTrip(t, tc.req); !tc.check(got) {
				t.Fatalf("decoded %v fails its check", got)
			}
		})
	}
}

func TestResponseRoundTrip(t *testing.T) {
	credits := &sluicev1.Credits{MessageLimit: 100, ByteLimit: 64 << 20}
	for name, resp := range map[string]*sluicev1.Response{
		"ack": {Version: 1, Body: &sluicev1.Response_Ack{Ack: &sluicev1.Ack{Ranges: []*sluicev1.IdRange{{First: 1, Last: 5}, {First: 7, Last: 7}}}}},
		"info": {Version: 1, Body: &sluicev1.Response_Info{Info: &sluicev1.ServiceMessage{
			Credits:       credits,
			QueueCapacity: 100,
			DictionaryIds: []uint32{9},
			Error: &sluicev1.MessageError{MessageId: 43, Code: sluicev1.ErrorCode_ERROR_CODE_UNKNOWN_DICTIONARY,
				Detail: "dictionary 9 unknown", Retryable: true},
			StoreStatus: &sluicev1.StoreStatus{Available: false, Detail: "disk full"},
		}}},
		"welcome": {Version: 1, Body: &sluicev1.Response_Welcome{Welcome: &sluicev1.Welcome{
			Credits: credits, MaxMessageBytes: 1 << 20, DictionaryIds: []uint32{3}, ProtocolVersion: 1, SessionId: "s-1",
		}}},
	} {
		t.Run(name, func(t *testing.T) { roundTrip(t, resp) })
	}
}

func TestReadMessagesRoundTrip(t *testing.T) {
	for name, m := range map[string]proto.Message{
		"start":     &sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Start{Start: &sluicev1.ReadStart{FromOffset: 10, FromCommitted: true, Follow: true, Group: "g"}}},
		"request_n": &sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_RequestN{RequestN: 64}},
		"commit":    &sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Commit{Commit: 11}},
		"message": &sluicev1.ReadResponse{Body: &sluicev1.ReadResponse_Message{Message: &sluicev1.StoredMessage{
			Offset: 10, AgentId: "agent-7", MessageId: 42, Records: [][]byte{[]byte("a"), {}},
		}}},
		"end": &sluicev1.ReadResponse{Body: &sluicev1.ReadResponse_End{End: &sluicev1.EndOfLog{NextOffset: 11}}},
	} {
		t.Run(name, func(t *testing.T) { roundTrip(t, m) })
	}
}

// sink answers Hello with Welcome and acks every batch: just enough to drive
// the generated gRPC code over an in-memory connection.
type sink struct {
	sluicev1.UnimplementedSinkServer
}

func (sink) Send(stream grpc.BidiStreamingServer[sluicev1.Request, sluicev1.Response]) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var resp *sluicev1.Response
		switch p := req.GetPayload().(type) {
		case *sluicev1.Request_Hello:
			resp = &sluicev1.Response{Version: 1, Body: &sluicev1.Response_Welcome{Welcome: &sluicev1.Welcome{
				ProtocolVersion: p.Hello.GetProtocolVersion(), SessionId: "session-" + p.Hello.GetAgentId(),
				Credits: &sluicev1.Credits{MessageLimit: 10, ByteLimit: 1 << 20},
			}}}
		default:
			id := req.GetMessageId()
			resp = &sluicev1.Response{Version: 1, Body: &sluicev1.Response_Ack{Ack: &sluicev1.Ack{
				Ranges: []*sluicev1.IdRange{{First: id, Last: id}},
			}}}
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func TestSinkSendOverGRPC(t *testing.T) {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	sluicev1.RegisterSinkServer(srv, sink{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a bound, not an expectation
	defer cancel()
	client := sluicev1.NewSinkClient(conn)
	stream, err := client.Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&sluicev1.Request{Version: 1, Payload: &sluicev1.Request_Hello{Hello: &sluicev1.Hello{AgentId: "a1", ProtocolVersion: 1}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if w := resp.GetWelcome(); w.GetSessionId() != "session-a1" || w.GetCredits().GetMessageLimit() != 10 {
		t.Fatalf("first response = %v, want a Welcome for a1", resp)
	}
	if err := stream.Send(&sluicev1.Request{Version: 1, MessageId: 5, RecordCount: 1,
		Payload: &sluicev1.Request_Plain{Plain: []byte{0xB1, 0x01, 0x01, 0x00}}}); err != nil {
		t.Fatal(err)
	}
	resp, err = stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetAck().GetRanges(); len(r) != 1 || r[0].GetFirst() != 5 || r[0].GetLast() != 5 {
		t.Fatalf("second response = %v, want an ack of 5", resp)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("Recv after CloseSend = %v, want io.EOF", err)
	}

	// Read is not implemented by this sink: the generated stub says so.
	rs, err := client.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Recv(); err == nil {
		t.Fatal("Read on a sink without it succeeded")
	}
}
