package grpctransport

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/protocol"
)

// TestKafkaZstdConverts: a kafka_zstd message and a Welcome asking for it
// survive the trip through the protobuf types and the wire encoding, and
// the message is reported under its own payload name.
func TestKafkaZstdConverts(t *testing.T) {
	msg := &protocol.Message{ID: 12, Records: 3, Codec: protocol.CodecKafkaZstd, Payload: []byte("section")}
	back := wireRequest(t, msg)
	if got := payloadName(back); got != "kafka_zstd" {
		t.Errorf("payload name %q", got)
	}
	f, err := FrameFromRequest(back)
	if err != nil || !reflect.DeepEqual(f, msg) {
		t.Fatalf("FrameFromRequest: %#v, %v; want %#v", f, err, msg)
	}
	var m protocol.Message
	if !messageFromRequest(&m, back) || !reflect.DeepEqual(&m, msg) {
		t.Fatalf("messageFromRequest: %#v", m)
	}

	w := &protocol.Welcome{Version: protocol.Version, SessionID: "s", Codec: protocol.CodecKafkaZstd}
	resp, err := ResponseFromFrame(w)
	if err != nil {
		t.Fatal(err)
	}
	frames := FramesFromResponse(nil, resp)
	if len(frames) != 1 || !reflect.DeepEqual(frames[0], w) {
		t.Fatalf("FramesFromResponse: %#v, want %#v", frames, w)
	}
}

// TestHelloSentBelowConverts: Hello's optional bound on sent ids
// survives the trip through the protobuf types, zero included, and an
// agent that sends none (before the field) reads as having none.
func TestHelloSentBelowConverts(t *testing.T) {
	for _, h := range []*protocol.Hello{
		{AgentID: "a", Version: protocol.Version, Watermark: 3, SentBelow: 9, HasSentBelow: true},
		{AgentID: "fresh", Version: protocol.Version, HasSentBelow: true},
		{AgentID: "old", Version: protocol.Version, Watermark: 3},
	} {
		f, err := FrameFromRequest(wireRequest(t, h))
		if err != nil {
			t.Fatal(err)
		}
		got := f.(*protocol.Hello)
		if got.AgentID != h.AgentID || got.SentBelow != h.SentBelow || got.HasSentBelow != h.HasSentBelow || got.Watermark != h.Watermark {
			t.Errorf("%+v came back as %+v", h, got)
		}
	}
}

// wireRequest is f as a Request after the trip through the wire encoding.
func wireRequest(t *testing.T, f protocol.Frame) *sluicev1.Request {
	t.Helper()
	var req sluicev1.Request
	if err := RequestFromFrame(&req, f); err != nil {
		t.Fatal(err)
	}
	req.Version = protocol.Version
	b, err := proto.Marshal(&req)
	if err != nil {
		t.Fatal(err)
	}
	var back sluicev1.Request
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return &back
}
