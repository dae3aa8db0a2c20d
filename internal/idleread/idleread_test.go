package idleread

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// serve answers each request with how its body's reads ended, after
// running during (with the Body) while the body is read.
func serve(t *testing.T, idle time.Duration, during func(*Body)) (addr string, results chan string) {
	results = make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := New(w, r, idle)
		if during != nil {
			go during(b)
		}
		n, err := io.Copy(io.Discard, b)
		results <- fmt.Sprintf("%d bytes, %v, stopped: %v", n, err, b.Stopped())
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), results
}

// stall sends a request declaring more body than it sends.
func stall(t *testing.T, addr string) net.Conn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789")
	return c
}

func wait(t *testing.T, results chan string) string {
	t.Helper()
	select {
	case r := <-results:
		return r
	case <-time.After(time.Minute):
		t.Fatal("the handler's read never returned")
		return ""
	}
}

// TestIdle: a body silent for the idle timeout fails with ErrIdle after
// what it sent.
func TestIdle(t *testing.T) {
	addr, results := serve(t, 20*time.Millisecond, nil)
	stall(t, addr)
	if got, want := wait(t, results), fmt.Sprintf("10 bytes, %v, stopped: %v", ErrIdle, ErrIdle); got != want {
		t.Fatalf("%s, want %s", got, want)
	}
}

// TestInterrupt: a read blocked on a silent body returns at once with the
// Interrupt's reason, which sticks; a later idle timeout does not replace
// it.
func TestInterrupt(t *testing.T) {
	why := errors.New("taken over")
	addr, results := serve(t, time.Hour, func(b *Body) {
		time.Sleep(10 * time.Millisecond) // let the read block (if it has not yet, it fails on entry)
		b.Interrupt(why)
		b.Interrupt(errors.New("second reason"))
	})
	stall(t, addr)
	if got, want := wait(t, results), fmt.Sprintf("10 bytes, %v, stopped: %v", why, why); got != want {
		t.Fatalf("%s, want %s", got, want)
	}
}

// TestWholeBody: a body that arrives is read to its end, untouched.
func TestWholeBody(t *testing.T) {
	addr, results := serve(t, time.Second, nil)
	resp, err := http.Post("http://"+addr, "text/plain", strings.NewReader(strings.Repeat("x", 100_000)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := wait(t, results); got != "100000 bytes, <nil>, stopped: <nil>" {
		t.Fatal(got)
	}
}

// TestInterruptAfterEOF: once the whole body is read, Interrupt leaves
// the connection alone: a deadline set then would fail net/http's own
// read, which watches for the client leaving while the handler works,
// and cancel the request's context (a tus upload being finished after
// its last PATCH body).
func TestInterruptAfterEOF(t *testing.T) {
	results := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := New(w, r, time.Minute)
		n, err := io.Copy(io.Discard, b)
		b.Interrupt(errors.New("taken over"))
		select {
		case <-r.Context().Done():
			results <- fmt.Sprintf("%d bytes, %v, then the request's context was cancelled: %v", n, err, context.Cause(r.Context()))
		case <-time.After(100 * time.Millisecond): // a bound on an event that must not come
			results <- fmt.Sprintf("%d bytes, %v", n, err)
		}
	}))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "text/plain", strings.NewReader("records\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := wait(t, results); got != "8 bytes, <nil>" {
		t.Fatal(got)
	}
}

// TestRemaining: a body with a Content-Length says how much of it is
// still to come as it is read (the disk store hashes the last block of
// a tus PATCH or POST as it arrives by it); a chunked body, whose length
// is not known, says so.
func TestRemaining(t *testing.T) {
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := New(w, r, time.Minute)
		var steps []string
		buf := make([]byte, 4)
		for {
			left, known := b.Remaining()
			steps = append(steps, fmt.Sprintf("%d/%v", left, known))
			if _, err := b.Read(buf); err != nil {
				break
			}
		}
		left, known := b.Remaining()
		got <- strings.Join(append(steps, fmt.Sprintf("%d/%v", left, known)), " ")
	}))
	defer srv.Close()
	post(t, srv.URL, strings.NewReader("0123456789"))
	if s := <-got; !strings.HasPrefix(s, "10/true 6/true 2/true 0/true") {
		t.Errorf("with a Content-Length: %s", s)
	}
	// A reader of unknown length makes the client send it chunked.
	post(t, srv.URL, io.MultiReader(strings.NewReader("0123456789")))
	if s := <-got; !strings.HasPrefix(s, "-1/false") {
		t.Errorf("chunked: %s", s)
	}
}

// post sends body to url and closes the answer.
func post(t *testing.T, url string, body io.Reader) {
	t.Helper()
	resp, err := http.Post(url, "text/plain", body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
