package rsproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

func setup(t *testing.T, token []byte) []byte {
	t.Helper()
	b, err := frame.AppendSetup(nil, frame.Setup{MajorVersion: 1, KeepaliveInterval: 30_000, MaxLifetime: 90_000, ResumeToken: token,
		MetadataMIME: []byte("application/octet-stream"), DataMIME: []byte("application/octet-stream")})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func resume(t *testing.T, token []byte) []byte {
	t.Helper()
	b, err := frame.AppendResume(nil, 1, 0, token, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serve runs p on a loopback listener until the test ends and returns
// its address.
func serve(t *testing.T, p *Proxy) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String()
}

func newProxy(t *testing.T, cfg Config) *Proxy {
	t.Helper()
	if cfg.Backends == nil {
		cfg.Backends = []string{"a:1", "b:1", "c:1"}
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRouteByToken: a resumable SETUP is tried first on its token's
// rendezvous server, then the others; its RESUME goes only to the server
// the SETUP reached, remembered or, once forgotten, by hashing alone.
// Tokens spread over every server.
func TestRouteByToken(t *testing.T) {
	p := newProxy(t, Config{Affinity: true})
	hits := map[int]int{}
	for i := range 300 {
		tok := []byte(fmt.Sprintf("token-%d", i))
		cands, remember, err := p.route(setup(t, tok))
		if err != nil || len(cands) != 3 || string(remember) != string(tok) {
			t.Fatalf("SETUP %s: %v %q %v", tok, cands, remember, err)
		}
		if want := p.rendezvous(tok); fmt.Sprint(cands) != fmt.Sprint(want) {
			t.Fatalf("SETUP %s tried %v, want the rendezvous order %v", tok, cands, want)
		}
		hits[cands[0]]++
		// The first choice is down: the SETUP lands on the second.
		landed := cands[0]
		if i%10 == 0 {
			landed = cands[1]
		}
		p.remember(tok, landed)
		got, _, err := p.route(resume(t, tok))
		if err != nil || len(got) != 1 || got[0] != landed {
			t.Fatalf("RESUME %s went to %v, want [%d] where its SETUP landed", tok, got, landed)
		}
	}
	for i := range 3 {
		if hits[i] < 60 {
			t.Errorf("tokens per server %v: want them spread", hits)
		}
	}
	// Another proxy (or this one restarted) knows no routes: hashing
	// alone finds the SETUP's first choice.
	q := newProxy(t, Config{Affinity: true})
	tok := []byte("token-1")
	got, _, _ := q.route(resume(t, tok))
	if got[0] != p.rendezvous(tok)[0] {
		t.Fatalf("an unknown token's RESUME went to %v, want its rendezvous server %d", got, p.rendezvous(tok)[0])
	}
	if st := p.Stats(); st.Setups != 300 || st.ResumableSetups != 300 || st.Resumes != 300 || st.ResumesRemembered != 300 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRouteOthers: SETUPs without a token, and everything without
// affinity, go round-robin; a first frame that is neither SETUP nor
// RESUME, or malformed, is refused.
func TestRouteOthers(t *testing.T) {
	p := newProxy(t, Config{Affinity: true})
	var firsts []int
	for range 3 {
		c, remember, err := p.route(setup(t, nil))
		if err != nil || len(c) != 3 || remember != nil {
			t.Fatalf("%v %q %v", c, remember, err)
		}
		firsts = append(firsts, c[0])
	}
	if fmt.Sprint(firsts) != "[0 1 2]" {
		t.Fatalf("round-robin starts %v, want [0 1 2]", firsts)
	}
	rr := newProxy(t, Config{Affinity: false})
	a, _, _ := rr.route(setup(t, []byte("tok")))
	b, _, _ := rr.route(resume(t, []byte("tok")))
	if a[0] == b[0] {
		t.Fatalf("without affinity the SETUP and its RESUME both went to %d; round-robin should have moved on", a[0])
	}
	ka, err := frame.AppendKeepalive(nil, true, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, first := range map[string][]byte{"keepalive": ka, "short": {0, 0}, "truncated setup": setup(t, []byte("tok"))[:12]} {
		if _, _, err := p.route(first); err == nil {
			t.Errorf("%s: routed, want refused", name)
		}
	}
}

// TestRoutesBounded: the remembered routes never exceed MaxTokens.
func TestRoutesBounded(t *testing.T) {
	p := newProxy(t, Config{Affinity: true, MaxTokens: 100})
	for i := range 10_000 {
		p.remember([]byte(fmt.Sprint(i)), i%3)
	}
	if len(p.routes) != 100 || len(p.order)-p.head != 100 || len(p.order) > 2*1024+100 {
		t.Fatalf("%d routes, %d in order (head %d), want 100", len(p.routes), len(p.order), p.head)
	}
	if _, ok := p.routes["9999"]; !ok {
		t.Fatal("the newest route was forgotten")
	}
}

// TestPendingBounded: connections that send no first frame hold a slot
// each; beyond MaxPending a new one is closed at once (and counted), so
// a flood of silent clients costs at most MaxPending × MaxFirstFrame.
func TestPendingBounded(t *testing.T) {
	p := newProxy(t, Config{Affinity: true, MaxPending: 2})
	addr := serve(t, p)
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	// One of the three is closed by the proxy: its read ends with EOF
	// while the other two wait for their first frame.
	closed := make(chan int, 3)
	for i, c := range conns {
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(time.Minute)) // a hang guard, not a timing
			if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
				closed <- i
			}
		}()
	}
	<-closed
	if st := p.Stats(); st.Refused != 1 {
		t.Fatalf("stats %+v, want 1 refused", st)
	}
}

// TestSetupFailsOverAndResumeFollows: when a token's first server cannot
// be dialled, its SETUP goes to the next in the token's order (the dial
// failure counted), and the RESUME of that token goes where the SETUP
// landed, not to the first choice that has come back.
func TestSetupFailsOverAndResumeFollows(t *testing.T) {
	live, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	firsts := make(chan []byte, 2)
	go func() {
		for {
			c, err := live.Accept()
			if err != nil {
				return
			}
			f, err := frame.ReadLengthPrefixed(c, nil, 1<<16)
			if err == nil {
				h, _ := frame.ParseHeader(f)
				firsts <- []byte(h.Type.String())
			}
			c.Close()
		}
	}()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens there now: dials fail at once
	backends := []string{deadAddr, live.Addr().String()}
	p := newProxy(t, Config{Affinity: true, Backends: backends})
	// A token whose first choice is the dead server.
	var tok []byte
	for i := 0; ; i++ {
		tok = []byte(fmt.Sprintf("token-%d", i))
		if backends[p.rendezvous(tok)[0]] == deadAddr {
			break
		}
	}
	addr := serve(t, p)
	send := func(f []byte) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		prefix, _ := frame.AppendLengthPrefix(nil, len(f))
		if _, err := c.Write(append(prefix, f...)); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-firsts:
			t.Logf("the live server got %s", got)
		case <-time.After(time.Minute): // a hang guard, not a timing
			t.Fatal("the live server got nothing")
		}
	}
	send(setup(t, tok))
	if st := p.Stats(); st.DialFailures != 1 {
		t.Fatalf("stats %+v, want one dial failure (the dead first choice)", st)
	}
	send(resume(t, tok))
	if st := p.Stats(); st.ResumesRemembered != 1 || st.DialFailures != 1 {
		t.Fatalf("stats %+v: the RESUME should have gone straight to where its SETUP landed", st)
	}
}
