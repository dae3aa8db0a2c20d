package rsocket_test

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/sluicehq/sluice/rsocket"
)

// upper answers request-response with the data in upper case and streams
// the words of the data; everything else is rejected.
type upper struct{ rsocket.UnimplementedResponder }

func (upper) RequestResponse(_ context.Context, p rsocket.Payload) (rsocket.Payload, error) {
	return rsocket.Payload{Data: []byte(strings.ToUpper(string(p.Data)))}, nil
}

func (upper) RequestStream(_ context.Context, p rsocket.Payload, out *rsocket.Sink) error {
	for _, w := range strings.Fields(string(p.Data)) {
		if err := out.Send(rsocket.Payload{Data: []byte(w)}); err != nil {
			return err // the requester cancelled
		}
	}
	return nil // completes the stream
}

// A server on a loopback port and a client asking it both ways.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, _, err := rsocket.Listen("tcp://127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go rsocket.Serve(ctx, ln, upper{})

	c, err := rsocket.Dial(ctx, "tcp://"+ln.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()

	p, err := c.RequestResponse(ctx, rsocket.Payload{Data: []byte("hello")})
	fmt.Println(string(p.Data), err)

	// Credits in batches of 2: the server sends two words per REQUEST_N.
	s, _ := c.RequestStream(ctx, rsocket.Payload{Data: []byte("one two three")}, 2)
	for {
		p, err := s.Next()
		if err == io.EOF {
			break
		}
		fmt.Println(string(p.Data))
	}

	// A model the responder does not implement: ERROR[REJECTED].
	ch, _ := c.RequestChannel(ctx, rsocket.Payload{Data: []byte("x")}, 1)
	_, err = ch.Next()
	fmt.Println(err)
	// Output:
	// HELLO <nil>
	// one
	// two
	// three
	// rsocket: REJECTED: not implemented
}

// Many requests in flight without a goroutine each: the callback runs on
// the connection's goroutine once the answer (or an error) is in, and may
// send the next request but must not block.
func ExampleConn_RequestResponseFunc() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, _, err := rsocket.Listen("tcp://127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go rsocket.Serve(ctx, ln, upper{})
	c, err := rsocket.Dial(ctx, "tcp://"+ln.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()

	words := []string{"a", "b", "c"}
	answers := make(chan string, len(words))
	for _, w := range words {
		c.RequestResponseFunc(ctx, rsocket.Payload{Data: []byte(w)}, func(p rsocket.Payload, err error) {
			if err != nil {
				answers <- err.Error()
				return
			}
			answers <- string(p.Data)
		})
	}
	got := map[string]bool{}
	for range words {
		got[<-answers] = true
	}
	fmt.Println(got["A"], got["B"], got["C"])
	// Output: true true true
}
