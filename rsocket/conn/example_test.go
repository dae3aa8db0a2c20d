package conn_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/rsocket/conn"
)

// Two machines wired back to back: the client asks, the server answers.
// A real driver does the same with a socket in place of deliver.
func Example() {
	client, _ := conn.New(conn.Config{Role: conn.Client}, 0)
	server, _ := conn.New(conn.Config{Role: conn.Server}, 0)
	_ = client.Start(0)

	// deliver moves from's output to "to" (as a TCP connection would) and
	// returns from's events.
	deliver := func(from, to *conn.Machine) []conn.Event {
		rd := from.Ready()
		for out := rd.Out; len(out) > 0; {
			f, rest, _ := conn.NextFrame(out)
			to.Receive(time.Duration(0), f)
			out = rest
		}
		evs := append([]conn.Event(nil), rd.Events...)
		from.Advance()
		return evs
	}

	id, _ := client.RequestResponse(0, nil, []byte("ping"))
	deliver(client, server) // SETUP, REQUEST_RESPONSE
	for _, ev := range deliver(server, client) {
		switch ev.Kind {
		case conn.EventSetup:
			fmt.Println("server: SETUP accepted, data MIME", ev.Setup.DataMIME)
		case conn.EventRequest:
			fmt.Println("server:", ev.Interaction, "on stream", ev.StreamID, string(ev.Data))
			_ = server.SendPayload(ev.StreamID, nil, []byte("pong"), true, true)
		}
	}
	deliver(server, client) // PAYLOAD
	for _, ev := range deliver(client, server) {
		fmt.Println("client:", ev.Kind, ev.StreamID == id, string(ev.Data), ev.Complete)
	}
	// Output:
	// server: SETUP accepted, data MIME application/octet-stream
	// server: request-response on stream 1 ping
	// client: Payload true pong true
}
