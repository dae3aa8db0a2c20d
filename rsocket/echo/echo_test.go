package echo

import (
	"context"
	"errors"
	"testing"

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
