package echo

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/extension"
)

// TestRules: the rules every model shares, applied to request-response
// (the CLI tests in cmd/sluice drive every model over TCP and WebSocket).
func TestRules(t *testing.T) {
	route := func(r string) []byte {
		tags, err := extension.AppendRouting(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		md, err := extension.AppendCompositeWellKnown(nil, extension.MIMERSocketRouting, tags)
		if err != nil {
			t.Fatal(err)
		}
		return md
	}
	var models []string
	e := &Responder{Hooks: Hooks{Request: func(m string) { models = append(models, m) }}}
	for _, c := range []struct {
		p       rsocket.Payload
		wantErr string
	}{
		{rsocket.Payload{Data: []byte("hi"), Metadata: []byte("plain metadata")}, ""},
		{rsocket.Payload{Data: []byte("hi"), Metadata: route("echo")}, ""},
		{rsocket.Payload{Data: []byte("hi"), Metadata: route("other")}, "unknown route: other"},
		{rsocket.Payload{Data: []byte("error:boom")}, "boom"},
	} {
		got, err := e.RequestResponse(context.Background(), c.p)
		var re *rsocket.Error
		switch {
		case c.wantErr == "" && (err != nil || string(got.Data) != string(c.p.Data) || string(got.Metadata) != string(c.p.Metadata)):
			t.Errorf("%q: got %q, %v; want the payload back", c.p.Data, got.Data, err)
		case c.wantErr != "" && (!errors.As(err, &re) || re.Message != c.wantErr):
			t.Errorf("%q: err %v, want APPLICATION_ERROR %q", c.p.Data, err, c.wantErr)
		}
	}
	if len(models) != 4 || models[0] != RequestResponse {
		t.Errorf("Request hook saw %v", models)
	}
}

// TestStream: "n" streams "0" … "n-1" in order, sent in batches while the
// requester grants credits a few at a time, then completes.
func TestStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := net.Pipe()
	if _, err := rsocket.ServeConn(ctx, b, &Responder{}); err != nil {
		t.Fatal(err)
	}
	c, err := rsocket.ClientConn(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.RequestStream(ctx, rsocket.Payload{Data: []byte("200")}, 7)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		p, err := s.Next()
		if err != nil || string(p.Data) != strconv.Itoa(i) {
			t.Fatalf("element %d: %q, %v", i, p.Data, err)
		}
	}
	if _, err := s.Next(); err != io.EOF {
		t.Fatalf("after the last element: %v, want io.EOF", err)
	}
}
