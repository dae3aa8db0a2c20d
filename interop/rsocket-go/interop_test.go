package rsocketgo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rgo "github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx"
	"github.com/rsocket/rsocket-go/rx/flux"
	"github.com/rsocket/rsocket-go/rx/mono"

	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/echo"
)

// caseTimeout bounds every case: a hang is a failure, not a stuck run.
const caseTimeout = 20 * time.Second

// record appends "direction|transport|case|result" for the table in
// docs/rsocket-interop.md to the file named by RSOCKET_INTEROP_RESULTS
// (set by the main module's test); without it nothing is written.
func record(t *testing.T, dir, tr, name string) {
	t.Cleanup(func() {
		res := "pass"
		switch {
		case t.Failed():
			res = "FAIL"
		case t.Skipped():
			res = "documented peer bug"
			if v, ok := openIssues.Load(t.Name()); ok && v.(bool) {
				res = "open: not attributed yet"
			}
		}
		path := os.Getenv("RSOCKET_INTEROP_RESULTS")
		if path == "" {
			return
		}
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Errorf("results file: %v", err)
			return
		}
		defer f.Close()
		fmt.Fprintf(f, "%s|%s|%s|%s\n", dir, tr, name, res)
	})
}

// openIssues marks tests skipped for a failure not yet attributed to
// either side (see the case for the evidence).
var openIssues sync.Map

// observed collects what a responder saw that the requester cannot (FNF,
// METADATA_PUSH, the end of a cancelled stream).
type observed struct {
	fnf, push, cancelled chan string
}

func newObserved() *observed {
	return &observed{fnf: make(chan string, 16), push: make(chan string, 16), cancelled: make(chan string, 16)}
}

func wait(t *testing.T, ctx context.Context, c chan string, want string) {
	t.Helper()
	select {
	case got := <-c:
		if got != want {
			t.Fatalf("observed %q, want %q", got, want)
		}
	case <-ctx.Done():
		t.Fatalf("never observed %q: %v", want, ctx.Err())
	}
}

// ---------- our server, their client ----------

// responder is our side's: the echo responder of `sluice rsocket serve`
// (package rsocket/echo), reporting what only the server sees to obs.
func (obs *observed) responder() *echo.Responder {
	return &echo.Responder{Hooks: echo.Hooks{
		FireAndForget: func(p rsocket.Payload) { obs.fnf <- string(p.Data) },
		MetadataPush:  func(md []byte) { obs.push <- string(md) },
		StreamStopped: func(n, _ uint64, _ error) { obs.cancelled <- "stream " + strconv.FormatUint(n, 10) },
	}}
}

// startOurs serves echo on a loopback port over tcp or ws, fragmenting
// its responses at 64 KiB so the peer must reassemble.
func startOurs(t *testing.T, tr string, obs *observed) string {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	opts := []rsocket.Option{rsocket.WithMaxFrameSize(64 * 1024)}
	if tr == "tcp" {
		go rsocket.Serve(ctx, ln, obs.responder(), opts...)
	} else {
		go rsocket.ServeWebSocket(ctx, ln, "/", obs.responder(), opts...)
	}
	return ln.Addr().String()
}

func theirClient(t *testing.T, ctx context.Context, tr, addr string) rgo.Client {
	t.Helper()
	var tp = rgo.TCPClient().SetAddr(addr).Build()
	if tr == "ws" {
		tp = rgo.WebsocketClient().SetURL("ws://" + addr + "/").Build()
	}
	c, err := rgo.Connect().Fragment(64 * 1024).Transport(tp).Start(ctx)
	if err != nil {
		t.Fatalf("rsocket-go client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func str(s string) payload.Payload { return payload.NewString(s, "") }

func TestTheirClientOurServer(t *testing.T) {
	for _, tr := range []string{"tcp", "ws"} {
		obs := newObserved()
		addr := startOurs(t, tr, obs)
		run := func(name string, f func(t *testing.T, ctx context.Context, c rgo.Client)) {
			t.Run(tr+"/"+name, func(t *testing.T) {
				record(t, "rsocket-go client → sluice server", tr, name)
				ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
				defer cancel()
				f(t, ctx, theirClient(t, ctx, tr, addr))
			})
		}
		run("request-response", func(t *testing.T, ctx context.Context, c rgo.Client) {
			p, err := c.RequestResponse(str("hello")).Block(ctx)
			if err != nil || p.DataUTF8() != "hello" {
				t.Fatalf("got %v, %v", p, err)
			}
		})
		run("fire-and-forget", func(t *testing.T, ctx context.Context, c rgo.Client) {
			c.FireAndForget(str("fnf-1"))
			wait(t, ctx, obs.fnf, "fnf-1")
		})
		run("metadata-push", func(t *testing.T, ctx context.Context, c rgo.Client) {
			c.MetadataPush(payload.New(nil, []byte("md-1")))
			wait(t, ctx, obs.push, "md-1")
		})
		run("request-stream (100 items, request-n 3)", func(t *testing.T, ctx context.Context, c rgo.Client) {
			got, err := subscribeBatches(ctx, c.RequestStream(str("100")), 3, -1)
			if err != nil {
				t.Fatal(err)
			}
			checkSeq(t, got, 100)
		})
		run("request-channel", func(t *testing.T, ctx context.Context, c rgo.Client) {
			in := flux.Just(str("a"), str("b"), str("c"))
			got, err := c.RequestChannel(in).BlockSlice(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if s := datas(got); s != "a,b,c" {
				t.Fatalf("got %s, want a,b,c", s)
			}
		})
		run("error", func(t *testing.T, ctx context.Context, c rgo.Client) {
			_, err := c.RequestResponse(str("error:boom")).Block(ctx)
			if err == nil || !strings.Contains(err.Error(), "boom") {
				t.Fatalf("got %v, want APPLICATION_ERROR boom", err)
			}
		})
		run("cancel mid-stream", func(t *testing.T, ctx context.Context, c rgo.Client) {
			got, err := subscribeBatches(ctx, c.RequestStream(str("1000000")), 5, 5)
			if err != nil {
				t.Fatal(err)
			}
			checkSeq(t, got, 5)
			wait(t, ctx, obs.cancelled, "stream 1000000")
		})
		run("1000 concurrent request-responses", func(t *testing.T, ctx context.Context, c rgo.Client) {
			failed, first := tryConcurrent(func(i int) (string, error) {
				p, err := c.RequestResponse(str("r" + strconv.Itoa(i))).Block(ctx)
				if err != nil {
					return "", err
				}
				return string(p.Data()), nil
			})
			// This case found a sluice bug: requests whose ids arrived
			// below the highest seen were ignored (rsocket-go writes from
			// many goroutines). Every request must be answered.
			if failed > 0 {
				t.Fatalf("%d of 1000 requests failed, first: %v", failed, first)
			}
		})
		run("4 MiB payload, fragmented at 64 KiB both ways", func(t *testing.T, ctx context.Context, c rgo.Client) {
			big := bytes.Repeat([]byte("0123456789abcdef"), 256*1024)
			p, err := c.RequestResponse(payload.New(big, nil)).Block(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p.Data(), big) {
				t.Fatalf("echo of %d bytes came back as %d bytes, not equal", len(big), len(p.Data()))
			}
		})
	}
}

// subscribeBatches requests n at a time and, when cancelAt >= 0, cancels
// after that many items; it returns the data received.
func subscribeBatches(ctx context.Context, f flux.Flux, n, cancelAt int) ([]string, error) {
	var (
		mu   sync.Mutex
		got  []string
		sub  rx.Subscription
		done = make(chan error, 1)
	)
	f.Subscribe(ctx,
		rx.OnSubscribe(func(_ context.Context, s rx.Subscription) {
			mu.Lock()
			sub = s
			mu.Unlock()
			s.Request(n)
		}),
		rx.OnNext(func(p payload.Payload) error {
			mu.Lock()
			got = append(got, string(p.Data())) // copy: the payload's buffer is reused
			k := len(got)
			s := sub
			mu.Unlock()
			if cancelAt >= 0 && k == cancelAt {
				s.Cancel()
				select {
				case done <- nil:
				default:
				}
			} else if k%n == 0 {
				s.Request(n)
			}
			return nil
		}),
		rx.OnComplete(func() {
			select {
			case done <- nil:
			default:
			}
		}),
		rx.OnError(func(err error) {
			select {
			case done <- err:
			default:
			}
		}),
	)
	select {
	case err := <-done:
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...), err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// drainData reads s (a stream or a channel) to its end and returns its
// payloads' data.
func drainData(t *testing.T, s interface {
	Next() (rsocket.Payload, error)
}) []string {
	t.Helper()
	var got []string
	for {
		p, err := s.Next()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatalf("after %d payloads: %v", len(got), err)
		}
		got = append(got, string(p.Data))
	}
}

func checkSeq(t *testing.T, got []string, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("got %d items, want %d", len(got), n)
	}
	for i, s := range got {
		if s != strconv.Itoa(i) {
			t.Fatalf("item %d is %q", i, s)
		}
	}
}

func datas(ps []payload.Payload) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.DataUTF8())
	}
	return strings.Join(s, ",")
}

func concurrent(t *testing.T, rr func(i int) (string, error)) {
	t.Helper()
	if failed, first := tryConcurrent(rr); failed > 0 {
		t.Fatalf("%d of 1000 requests failed, first: %v", failed, first)
	}
}

// tryConcurrent runs 1,000 request-responses at once on one connection.
func tryConcurrent(rr func(i int) (string, error)) (failed int, first error) {
	const n = 1000
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			got, err := rr(i)
			if err == nil && got != "r"+strconv.Itoa(i) {
				err = fmt.Errorf("request %d answered %q", i, got)
			}
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			if first == nil {
				first = err
			}
			failed++
		}
	}
	return failed, first
}

// ---------- their server, our client ----------

// theirEcho is rsocket-go's responder with the same conventions as echo.
func theirEcho(obs *observed) rgo.RSocket {
	return rgo.NewAbstractSocket(
		rgo.MetadataPush(func(p payload.Payload) {
			md, _ := p.Metadata()
			obs.push <- string(md)
		}),
		rgo.FireAndForget(func(p payload.Payload) { obs.fnf <- string(p.Data()) }),
		rgo.RequestResponse(func(p payload.Payload) mono.Mono {
			if msg, ok := strings.CutPrefix(string(p.Data()), "error:"); ok {
				return mono.Error(errors.New(msg))
			}
			return mono.Just(payload.Clone(p))
		}),
		rgo.RequestStream(func(p payload.Payload) flux.Flux {
			data := string(p.Data())
			n, _ := strconv.Atoi(data)
			// flux.Create's ctx is not cancelled by a CANCEL (its sink
			// panics, recovered by rsocket-go's worker pool, on the next
			// Next), so the cancel is observed with DoFinally.
			return flux.Create(func(ctx context.Context, s flux.Sink) {
				for i := 0; i < n; i++ {
					select {
					case <-ctx.Done():
						return
					default:
					}
					s.Next(str(strconv.Itoa(i)))
				}
				s.Complete()
			}).DoFinally(func(sig rx.SignalType) {
				if sig == rx.SignalCancel {
					obs.cancelled <- "stream " + data
				}
			})
		}),
		rgo.RequestChannel(func(in flux.Flux) flux.Flux {
			// A channel opened with data "digest" is answered with each
			// later element's digest (lent_test.go), not its echo.
			first, digests := true, false
			return in.Map(func(p payload.Payload) (payload.Payload, error) {
				if first {
					first, digests = false, string(p.Data()) == "digest"
				} else if digests {
					return str(digestOf(p)), nil
				}
				return payload.Clone(p), nil
			})
		}),
	)
}

// startTheirs serves theirEcho on a free loopback port; it returns the
// address once the server reports it started.
func startTheirs(t *testing.T, tr string, obs *observed) string {
	return startTheirsWith(t, tr, obs, false)
}

// startTheirsWith is startTheirs, with resumption on when resume is set.
func startTheirsWith(t *testing.T, tr string, obs *observed, resume bool) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // rsocket-go listens itself; the port is free again
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tp := rgo.TCPServer().SetAddr(addr).Build()
	if tr == "ws" {
		tp = rgo.WebsocketServer().SetAddr(addr).SetPath("/").Build()
	}
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		b := rgo.Receive()
		if resume {
			b = b.Resume(rgo.WithServerResumeSessionDuration(time.Minute))
		}
		errc <- b.
			Fragment(64 * 1024).
			OnStart(func() { close(started) }).
			Acceptor(func(context.Context, payload.SetupPayload, rgo.CloseableRSocket) (rgo.RSocket, error) {
				return theirEcho(obs), nil
			}).
			Transport(tp).
			Serve(ctx)
	}()
	select {
	case <-started:
	case err := <-errc:
		t.Fatalf("rsocket-go server: %v", err)
	case <-time.After(caseTimeout):
		t.Fatal("rsocket-go server did not start")
	}
	return addr
}

func TestOurClientTheirServer(t *testing.T) {
	for _, tr := range []string{"tcp", "ws"} {
		obs := newObserved()
		addr := startTheirs(t, tr, obs)
		run := func(name string, f func(t *testing.T, ctx context.Context, c *rsocket.Conn)) {
			t.Run(tr+"/"+name, func(t *testing.T) {
				record(t, "sluice client → rsocket-go server", tr, name)
				ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
				defer cancel()
				c, err := rsocket.Dial(ctx, tr+"://"+addr+map[string]string{"tcp": "", "ws": "/"}[tr],
					rsocket.WithMaxFrameSize(64*1024))
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				defer c.Close()
				f(t, ctx, c)
			})
		}
		data := func(s string) rsocket.Payload { return rsocket.Payload{Data: []byte(s)} }
		run("request-response", func(t *testing.T, ctx context.Context, c *rsocket.Conn) {
			p, err := c.RequestResponse(ctx, data("hello"))
			if err != nil || string(p.Data) != "hello" {
				t.Fatalf("got %q, %v", p.Data, err)
			}
		})
		run("fire-and-forget", func(t *testing.T, ctx context.Context, c *rsocket.Conn) {
			if err := c.FireAndForget(ctx, data("fnf-1")); err != nil {
				t.Fatal(err)
			}
			wait(t, ctx, obs.fnf, "fnf-1")
		})
		run("metadata-push", func(t *testing.T, ctx context.Context, c *rsocket.Conn) {
			if err := c.MetadataPush(ctx, []byte("md-1")); err != nil {
				t.Fatal(err)
			}
			wait(t, ctx, obs.push, "md-1")
		})
		run("request-stream (100 items, request-n 3)", func(t *testing.T, ctx context.Context, c *rsocket.Conn) {
			s, err := c.RequestStream(ctx, data("100"), 3)
			if err != nil {
				t.Fatal(err)
			}
			checkSeq(t, drainData(t, s), 100)
		})
		run("request-channel", func(t *testing.T, ctx context.Context, c *rsocket.Conn) {
			ch, err := c.RequestChannel(ctx, data("a"), 8)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"b", "c"} {
				if err := ch.Send(data(s)); err != nil {
					t.Fatal(err)
				}
			}
			if err := ch.Complete(); err != nil {
				t.Fatal(err)
			}
			got := drainData(t, ch)
			if s := strings.Join(got, ","); s != "a,b,c" {
				t.Fatalf("got %s, want a,b,c", s)
			}
		})
		run("error", func(t *testing.T, ctx context.Context, c *rsocket.Conn) {
			_, err := c.RequestResponse(ctx, data("error:boom"))
			var re *rsocket.Error
			if !errors.As(err, &re) || re.Code.String() != "APPLICATION_ERROR" || re.Message != "boom" {
				t.Fatalf("got %v, want APPLICATION_ERROR boom", err)
			}
		})
		run("cancel mid-stream", func(t *testing.T, ctx context.Context, c *rsocket.Conn) {
			s, err := c.RequestStream(ctx, data("1000000"), 5)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for len(got) < 5 {
				p, err := s.Next()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(p.Data))
			}
			s.Cancel()
			checkSeq(t, got, 5)
			wait(t, ctx, obs.cancelled, "stream 1000000")
		})
		run("1000 concurrent request-responses", func(t *testing.T, ctx context.Context, c *rsocket.Conn) {
			concurrent(t, func(i int) (string, error) {
				p, err := c.RequestResponse(ctx, data("r"+strconv.Itoa(i)))
				return string(p.Data), err
			})
		})
		run("4 MiB payload, fragmented at 64 KiB both ways", func(t *testing.T, ctx context.Context, c *rsocket.Conn) {
			big := bytes.Repeat([]byte("0123456789abcdef"), 256*1024)
			p, err := c.RequestResponse(ctx, rsocket.Payload{Data: big})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Data) < len(big) && len(p.Data) <= 64*1024 && bytes.HasPrefix(big, p.Data) {
				// rsocket-go v0.8.16 sets the C (complete) flag on the first
				// fragment of a fragmented response PAYLOAD, so a conforming
				// requester completes with the first fragment's data; fixed
				// only on rsocket-go's unreleased master.
				t.Skipf("documented peer bug: rsocket-go v0.8.16 sets C on the first fragment of a fragmented PAYLOAD; "+
					"the %d-byte echo completed after its first fragment (%d bytes)", len(big), len(p.Data))
			}
			if !bytes.Equal(p.Data, big) {
				t.Fatalf("echo of %d bytes came back as %d bytes, not equal", len(big), len(p.Data))
			}
		})
	}
}

// TestControlTheirClientTheirServer is rsocket-go against itself: when a
// case fails here too, the failure is rsocket-go's, not sluice's.
func TestControlTheirClientTheirServer(t *testing.T) {
	obs := newObserved()
	addr := startTheirs(t, "tcp", obs)
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	c := theirClient(t, ctx, "tcp", addr)
	concurrent(t, func(i int) (string, error) {
		p, err := c.RequestResponse(str("r" + strconv.Itoa(i))).Block(ctx)
		if err != nil {
			return "", err
		}
		return string(p.Data()), nil
	})
}
