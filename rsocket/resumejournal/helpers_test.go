package resumejournal

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/echo"
	"github.com/sluicehq/sluice/rsocket/internal/resumetest"
)

// The helpers of package rsocket's resume tests that these tests share
// (resume_test.go there); the servers answer by rsocket/echo's rules.

// withinBound is how long within waits.
var withinBound = 60 * time.Second

// within fails the test when f does not return within a generous bound
// (a hang is a failure, not a timing assertion).
func within(t testing.TB, what string, f func()) {
	t.Helper()
	resumetest.Within(t, what, withinBound, f)
}

// waitUntil polls cond (a hang is a failure, not a timing assertion).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no %s after 30 s", what)
		}
	}
}

// readStream reads a stream of "0".."n-1" and checks it is complete, in
// order and without duplicates (rsocket/internal/resumetest).
func readStream(s *rsocket.Stream, n int) error { return resumetest.ReadAll(itemsOf(s), n) }

// itemsOf is s's next function for resumetest: the items' data.
func itemsOf(s *rsocket.Stream) func() ([]byte, error) {
	return func() ([]byte, error) {
		p, err := s.Next()
		return p.Data, err
	}
}

// dialResume dials url with resumption and quick redials; the
// connection is closed at the end of the test.
func dialResume(t testing.TB, url string) *rsocket.Conn {
	t.Helper()
	c, err := rsocket.Dial(context.Background(), url, rsocket.WithResume(rsocket.ResumeConfig{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// resumeServer serves the echo responder with sessions in memory (cfg's
// default store) on a tcp:// listener until the test ends.
func resumeServer(t testing.TB, cfg rsocket.ResumeConfig) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ln, _, err := rsocket.Listen("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rsocket.Serve(ctx, ln, &echo.Responder{}, rsocket.WithResume(cfg))
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// streamer answers a request-stream of "n" with n copies of elem, in
// batches of 64 (SendBatch): the benchmark's stream, as package
// rsocket's BenchmarkRequestStream serves it.
type streamer struct {
	rsocket.UnimplementedResponder
	elem []byte
}

func (s streamer) RequestStream(_ context.Context, p rsocket.Payload, out *rsocket.Sink) error {
	n, err := strconv.Atoi(string(p.Data))
	if err != nil {
		return err
	}
	var ps [64]rsocket.Payload
	for i := range ps {
		ps[i] = rsocket.Payload{Data: s.elem}
	}
	for n > 0 {
		k := min(n, len(ps))
		if _, err := out.SendBatch(ps[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// rrEcho answers a request-response with the request, in a handler
// goroutine: package rsocket's test echo, which the benchmark's
// request-responses measured before the journal had a package of its own
// (echo.Responder answers inline, NonBlocking, which batches
// differently).
type rrEcho struct{ rsocket.UnimplementedResponder }

func (rrEcho) RequestResponse(_ context.Context, p rsocket.Payload) (rsocket.Payload, error) {
	if m, ok := strings.CutPrefix(string(p.Data), "error:"); ok {
		return rsocket.Payload{}, rsocket.ApplicationError("%s", m)
	}
	return p, nil
}
