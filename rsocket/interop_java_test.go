package rsocket_test

// Interoperability with rsocket-java 1.1.5 (io.rsocket:rsocket-core and
// rsocket-transport-netty from Maven Central), the reference RSocket
// implementation, over TCP and WebSocket in both directions. The Java peer
// is interop/rsocket-java (setup.sh builds it into
// ~/.cache/sluice/rsocket-java). One JVM runs the Java client against both
// of our servers; one JVM serves both Java servers. Results are the
// rsocket-java rows of docs/rsocket-interop.md (interopdoc_test.go).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/peers"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/echo"
	"github.com/sluicehq/sluice/rsocket/extension"

	"github.com/sluicehq/sluice/internal/testkit/testskip"
)

// longMIME is a custom MIME type of 128 bytes, the most the length-1
// encoding that rsocket-java uses can carry (rsocket-go refuses it).
var longMIME = "application/x." + strings.Repeat("a", 128-len("application/x."))

// compositeWant is describeComposite of the entries both sides encode
// (the same string as COMPOSITE_WANT in Peer.java).
var compositeWant = "message/x.rsocket.routing.v0=route:echo.route,v1;" +
	"message/x.rsocket.authentication.v0=simple:user/pass;" +
	"application/x.sluice=custom;" + longMIME + "=long;text/plain=plain"

// compositeMetadata encodes those entries with rsocket/extension.
func compositeMetadata() ([]byte, error) {
	route, err := extension.AppendRoutingTag(nil, "echo.route")
	if err == nil {
		route, err = extension.AppendRoutingTag(route, "v1")
	}
	auth, err2 := extension.AppendAuthSimple(nil, "user", "pass")
	var md []byte
	for _, e := range []struct {
		mime string
		v    []byte
	}{{"message/x.rsocket.routing.v0", route}, {"message/x.rsocket.authentication.v0", auth},
		{"application/x.sluice", []byte("custom")}, {longMIME, []byte("long")}, {"text/plain", []byte("plain")}} {
		if md, err = extension.AppendCompositeEntry(md, e.mime, e.v); err != nil {
			return nil, err
		}
	}
	return md, errors.Join(err, err2)
}

// describeComposite decodes composite metadata with rsocket/extension into
// "mime=value;..." (routing as route:TAGS, simple auth as simple:USER/PASS).
func describeComposite(md []byte) (string, error) {
	var parts []string
	it := extension.Composite(md)
	for it.Next() {
		e := it.Entry()
		v := string(e.Metadata)
		switch e.MIME() {
		case "message/x.rsocket.routing.v0":
			var tags []string
			rt := extension.Routing(e.Metadata)
			for rt.Next() {
				tags = append(tags, string(rt.Tag()))
			}
			if err := rt.Err(); err != nil {
				return "", err
			}
			v = "route:" + strings.Join(tags, ",")
		case "message/x.rsocket.authentication.v0":
			a, err := extension.ParseAuth(e.Metadata)
			if err != nil {
				return "", err
			}
			u, p, err := a.Simple()
			if err != nil {
				return "", err
			}
			v = "simple:" + string(u) + "/" + string(p)
		}
		parts = append(parts, e.MIME()+"="+v)
	}
	return strings.Join(parts, ";"), it.Err()
}

// compositeEcho is the echo responder, except that a request-response with
// data "composite" is answered with describeComposite of its metadata.
type compositeEcho struct{ *echo.Responder }

func (c compositeEcho) RequestResponse(ctx context.Context, p rsocket.Payload) (rsocket.Payload, error) {
	if string(p.Data) != "composite" {
		return c.Responder.RequestResponse(ctx, p)
	}
	d, err := describeComposite(p.Metadata)
	if err != nil {
		return rsocket.Payload{}, rsocket.ApplicationError("composite metadata: %v", err)
	}
	return rsocket.Payload{Data: []byte(d)}, nil
}

const (
	javaClDir = "rsocket-java client → sluice server"
	javaSvDir = "sluice client → rsocket-java server"
)

var javaCases = []string{"request_response", "fire_and_forget", "metadata_push", "request_stream",
	"request_channel", "error", "cancel", "concurrent_1000", "large_20MiB", "composite_metadata", "keepalive"}

// javaClientCases adds what only their client does here: lease, and a
// resumable SETUP against a server without resumption (resume_stream,
// both ways, is javaResume's).
var javaClientCases = append(append([]string(nil), javaCases...), "lease", "resume_rejected")

// rsocketJava returns the java binary and the peer's classpath, or skips
// (fails with SLUICE_INTEROP=require) when either is missing.
func rsocketJava(t *testing.T) (string, string) {
	t.Helper()
	java, cp, err := peers.RSocketJava("..")
	if err != nil {
		testskip.Missing(t, "SLUICE_INTEROP", testskip.Interop, err.Error())
	}
	return java, cp
}

// TestInteropJava runs both directions, then rewrites or checks the
// rsocket-java rows of the table.
func TestInteropJava(t *testing.T) {
	java, cp := rsocketJava(t)
	rows := &interopRows{peer: "rsocket-java"}
	// The directions share nothing, so their JVMs start side by side.
	t.Run("both", func(t *testing.T) {
		t.Run("JavaClient", func(t *testing.T) { t.Parallel(); javaClient(t, java, cp, rows) })
		t.Run("JavaServer", func(t *testing.T) { t.Parallel(); javaServer(t, java, cp, rows) })
		t.Run("JavaResume", func(t *testing.T) { t.Parallel(); javaResume(t, java, cp, rows) })
	})
	rows.check(t, 2*(len(javaClientCases)+len(javaCases))+4)
}

// javaResume: resumption both ways over TCP and WebSocket (row
// resume_stream). A request-stream of 200,000 elements goes through a
// proxy that cuts the connection 8 times at seeded random byte offsets
// (bytes in flight lost); it must arrive complete, in order, once, the
// requester resuming after every cut. rsocket-java's client is `Peer
// resume-stream` (RSocketConnector.resume, redial every 50 ms) against
// our Serve/ServeWebSocket with WithResume; our client with WithResume
// goes to `Peer server resume` (RSocketServer.resume on both servers).
func javaResume(t *testing.T, java, cp string, rows *interopRows) {
	const items, cuts = 200_000, 8
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	for i, tr := range []string{"tcp", "ws"} {
		addr, path, stop := serveResumableEcho(t, ctx, tr)
		p := rsocket.NewCutProxy(t, addr, uint64(21+i), cuts, 4<<10, 200<<10, 0)
		target := p.Addr()
		if tr == "ws" {
			target = "ws://" + p.Addr() + path
		}
		out, err := exec.CommandContext(ctx, java, peers.JVMFlags, "-cp", cp, "sluice.interop.Peer", "resume-stream", tr, target, strconv.Itoa(items)).Output()
		stop()
		var f []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "RESULT\t") {
				f = strings.Split(l, "\t")
			}
		}
		switch {
		case err != nil:
			rows.add(javaClDir, tr, "resume_stream", "FAIL", fmt.Sprintf("java: %v", err))
		case len(f) != 5 || f[3] != "pass":
			rows.add(javaClDir, tr, "resume_stream", "FAIL", fmt.Sprintf("result %q", f))
		case p.Cuts() != cuts:
			rows.add(javaClDir, tr, "resume_stream", "FAIL", fmt.Sprintf("%d cuts, want %d: the stream must outlast them", p.Cuts(), cuts))
		default:
			rows.add(javaClDir, tr, "resume_stream", "pass", fmt.Sprintf("%s through %d cuts (%d connections)", f[4], p.Cuts(), p.Accepted()))
		}
	}

	addrs, _ := peers.StartRSocketJavaServer(t, ctx, java, cp, "resume")
	for i, tr := range []string{"tcp", "ws"} {
		// Over WebSocket, past the upgrade request and the RESUME: a cut
		// inside them fails a redial instead of breaking a session.
		minUp := map[string]int{"tcp": 0, "ws": 1024}[tr]
		p := rsocket.NewCutProxy(t, addrs[tr], uint64(22+i), cuts, 4<<10, 200<<10, minUp)
		url := "tcp://" + p.Addr()
		if tr == "ws" {
			url = "ws://" + p.Addr() + "/"
		}
		result, detail := "pass", ""
		c, err := rsocket.Dial(ctx, url, rsocket.WithResume(rsocket.ResumeConfig{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}))
		if err == nil {
			var s *rsocket.Stream
			if s, err = c.RequestStream(ctx, rsocket.Payload{Data: []byte(strconv.Itoa(items))}, 256); err == nil {
				err = rsocket.ReadStream(s, items)
			}
			st := c.ResumeStats()
			c.Close()
			if err == nil && (p.Cuts() != cuts || st.Resumed != cuts) {
				err = fmt.Errorf("%d cuts and %d resumes, want %d each", p.Cuts(), st.Resumed, cuts)
			}
			detail = fmt.Sprintf("%d elements in order, once; %d cuts, %d resumes", items, p.Cuts(), st.Resumed)
		}
		if err != nil {
			result, detail = "FAIL", err.Error()
		}
		rows.add(javaSvDir, tr, "resume_stream", result, detail)
	}
}

// javaClient: the Java client → our servers. TCP is metered with a 1 MiB
// max frame on our side; WebSocket uses our default max frame (16 MiB - 1,
// the most a frame can be) so that rsocket-java's 16 MiB WebSocket frame
// limit meets our largest frames.
func javaClient(t *testing.T, java, cp string, rows *interopRows) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	obs := map[string]*pyObserved{}
	for _, tr := range []string{"tcp", "ws"} {
		obs[tr] = &pyObserved{fnf: make(chan string, 4), push: make(chan string, 4), cancelled: make(chan string, 4)}
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mln := &meteredListener{Listener: tln}
	go rsocket.Serve(ctx, mln, compositeEcho{obs["tcp"].responder()}, rsocket.WithMaxFrameSize(1<<20))
	wln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go rsocket.ServeWebSocket(ctx, wln, "/", compositeEcho{obs["ws"].responder()})
	// Lease servers: 3 requests per 2 s lease, renewed every second; a
	// request over the lease gets REJECTED.
	leaseOpt := rsocket.WithLease(2*time.Second, 3)
	ltln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go rsocket.Serve(ctx, ltln, &echo.Responder{}, leaseOpt)
	lwln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go rsocket.ServeWebSocket(ctx, lwln, "/", &echo.Responder{}, leaseOpt)

	cmd := exec.CommandContext(ctx, java, peers.JVMFlags, "-cp", cp, "sluice.interop.Peer", "client",
		"tcp", tln.Addr().String(), "ws", "ws://"+wln.Addr().String()+"/",
		"tcp+lease", ltln.Addr().String(), "ws+lease", "ws://"+lwln.Addr().String()+"/")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("java client: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	type result struct {
		ok     bool
		detail string
	}
	got := map[string]result{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 5 || f[0] != "RESULT" {
			t.Fatalf("the java client printed a line that is not a result: %q", sc.Text())
		}
		got[f[1]+"/"+f[2]] = result{f[3] == "pass", f[4]}
	}
	wait := func(ch chan string, what string) (string, bool) {
		select {
		case v := <-ch:
			return v, true
		case <-time.After(30 * time.Second):
			t.Errorf("%s: the server did not observe it within 30 s", what)
			return "", false
		}
	}
	for _, tr := range []string{"tcp", "ws"} {
		for _, c := range javaClientCases {
			t.Run(tr+"/"+c, func(t *testing.T) {
				r, ok := got[tr+"/"+c]
				if !ok {
					rows.add(javaClDir, tr, c, "FAIL", "no result from the java client")
					t.Fatalf("the java client printed no result for %s/%s; stderr:\n%s", tr, c, stderr.String())
				}
				if !r.ok {
					rows.add(javaClDir, tr, c, "FAIL", r.detail)
					t.Fatalf("%s/%s: %s", tr, c, r.detail)
				}
				detail := r.detail
				switch c {
				case "fire_and_forget":
					v, ok := wait(obs[tr].fnf, c)
					if ok && v != "fnf-from-java" {
						t.Errorf("fire-and-forget data %q", v)
					}
					detail = "server got " + strconv.Quote(v)
				case "metadata_push":
					v, ok := wait(obs[tr].push, c)
					if ok && v != "push-from-java" {
						t.Errorf("metadata push %q", v)
					}
					detail = "server got " + strconv.Quote(v)
				case "cancel":
					v, _ := wait(obs[tr].cancelled, c)
					detail = r.detail + "; " + v
				case "large_20MiB":
					if tr == "tcp" {
						in, outm := mln.summary()
						if in.largest() > 1<<20 || outm.largest() > 1<<20 {
							t.Errorf("a frame over 1 MiB: java sent %v; we sent %v", in, outm)
						}
						detail = fmt.Sprintf("%s; java sent %v; we sent %v", r.detail, in, outm)
					} else {
						detail = r.detail + "; we fragment at 16 MiB - 1, within rsocket-java's WebSocket frame limit"
					}
				}
				t.Log(detail)
				if t.Failed() {
					rows.add(javaClDir, tr, c, "FAIL", detail)
				} else {
					rows.add(javaClDir, tr, c, "pass", detail)
				}
			})
		}
	}
}

// javaServer: our client → the Java servers. Besides the connection the
// cases use, each transport has a connection that only checks keepalive:
// every 100 ms with a 2 s max lifetime, our client closes it unless
// rsocket-java answers. It is dialled after a warm-up request (a cold JVM
// may take over a second to answer the first frame) and carries nothing
// else, so a big payload cannot delay the answers.
func javaServer(t *testing.T, java, cp string, rows *interopRows) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	addrs, events := peers.StartRSocketJavaServer(t, ctx, java, cp)
	const kaLifetime = 2 * time.Second
	type conns struct {
		main, ka *rsocket.Conn
		kaSince  time.Time
		in, out  *frameMeter
	}
	all := map[string]*conns{}
	for _, tr := range []string{"tcp", "ws"} {
		var opts []rsocket.Option // the defaults a user gets: 20 MiB fragmented fits the 64 MiB MaxPayloadSize
		cs := &conns{in: &frameMeter{}, out: &frameMeter{}}
		var err error
		if tr == "tcp" {
			nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addrs[tr])
			if err != nil {
				t.Fatal(err)
			}
			cs.main, err = rsocket.ClientConn(ctx, meteredConn{nc, cs.in, cs.out}, append(opts, rsocket.WithMaxFrameSize(1<<20))...)
			if err != nil {
				t.Fatal(err)
			}
		} else if cs.main, err = rsocket.Dial(ctx, "ws://"+addrs[tr]+"/", opts...); err != nil {
			t.Fatal(err)
		}
		defer cs.main.Close()
		if _, err := cs.main.RequestResponse(ctx, rsocket.Payload{Data: []byte("warm-up")}); err != nil {
			t.Fatalf("%s warm-up: %v", tr, err)
		}
		url := "tcp://" + addrs[tr]
		if tr == "ws" {
			url = "ws://" + addrs[tr] + "/"
		}
		if cs.ka, err = rsocket.Dial(ctx, url, rsocket.WithKeepalive(100*time.Millisecond, kaLifetime)); err != nil {
			t.Fatal(err)
		}
		defer cs.ka.Close()
		cs.kaSince = time.Now()
		all[tr] = cs
	}
	for _, tr := range []string{"tcp", "ws"} {
		c, in, outm := all[tr].main, all[tr].in, all[tr].out
		next := func(t *testing.T, kind string) string {
			t.Helper()
			select {
			case ev := <-events[tr]:
				if ev.Kind != kind {
					t.Fatalf("java server reported %s %q, want %s", ev.Kind, ev.Value, kind)
				}
				return ev.Value
			case <-time.After(30 * time.Second):
				t.Fatalf("the java server reported no %s within 30 s", kind)
			}
			return ""
		}
		cases := ourClientCases(c, next)
		cases["large_20MiB"] = func(t *testing.T, ctx context.Context) string {
			detail := largeEcho(t, ctx, c)
			if tr == "tcp" {
				if in.largest() > 1<<20 || outm.largest() > 1<<20 {
					t.Fatalf("a frame over 1 MiB: java sent %v; we sent %v", in, outm)
				}
				return fmt.Sprintf("%s; java sent %v; we sent %v", detail, in, outm)
			}
			return detail + "; we fragment at 16 MiB - 1, within rsocket-java's WebSocket frame limit"
		}
		cases["composite_metadata"] = func(t *testing.T, ctx context.Context) string {
			md, err := compositeMetadata()
			if err != nil {
				t.Fatal(err)
			}
			p, err := c.RequestResponse(ctx, rsocket.Payload{Metadata: md, Data: []byte("composite")})
			if err != nil || string(p.Data) != compositeWant {
				t.Fatalf("rsocket-java decoded %q, %v; want %q", p.Data, err, compositeWant)
			}
			return "routing, simple auth, custom MIME (20 and 128 bytes), text/plain: rsocket-java decoded all as sent"
		}
		cases["keepalive"] = func(t *testing.T, ctx context.Context) string {
			ka := all[tr].ka
			// The condition under test is elapsed time: two max lifetimes.
			if d := time.Until(all[tr].kaSince.Add(2*kaLifetime + 100*time.Millisecond)); d > 0 {
				time.Sleep(d)
			}
			select {
			case <-ka.Done():
				t.Fatalf("the connection closed: %v", ka.Err())
			default:
			}
			p, err := ka.RequestResponse(ctx, rsocket.Payload{Data: []byte("still")})
			if err != nil || string(p.Data) != "still" {
				t.Fatalf("after 4.1 s: %q, %v", p.Data, err)
			}
			return "our client, keepalive 100 ms, max lifetime 2 s: connection alive and answering after 4.1 s"
		}
		for _, name := range javaCases {
			t.Run(tr+"/"+name, func(t *testing.T) {
				cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
				defer ccancel()
				defer func() {
					if t.Failed() {
						rows.add(javaSvDir, tr, name, "FAIL", "see the test log")
					}
				}()
				detail := cases[name](t, cctx)
				t.Log(detail)
				rows.add(javaSvDir, tr, name, "pass", detail)
			})
		}
	}
}

// largeEcho sends 20 MiB with metadata and checks the echo.
func largeEcho(t *testing.T, ctx context.Context, c *rsocket.Conn) string {
	t.Helper()
	data := make([]byte, largePayload)
	for i := range data {
		data[i] = byte(i * 7)
	}
	p, err := c.RequestResponse(ctx, rsocket.Payload{Metadata: []byte("big"), Data: data})
	if err != nil || !bytes.Equal(p.Data, data) || string(p.Metadata) != "big" {
		t.Fatalf("got %d bytes, %v", len(p.Data), err)
	}
	return "20 MiB echoed"
}

// ourClientCases are the cases our client runs against a peer's echo
// server; next returns the value of the server's next reported event of
// a kind (fnf, push, cancel).
func ourClientCases(c *rsocket.Conn, next func(t *testing.T, kind string) string) map[string]func(t *testing.T, ctx context.Context) string {
	return map[string]func(t *testing.T, ctx context.Context) string{
		"request_response": func(t *testing.T, ctx context.Context) string {
			p, err := c.RequestResponse(ctx, rsocket.Payload{Metadata: []byte("meta"), Data: []byte("hello")})
			if err != nil || string(p.Data) != "hello" || string(p.Metadata) != "meta" {
				t.Fatalf("got %q/%q, %v", p.Data, p.Metadata, err)
			}
			return fmt.Sprintf("data %q metadata %q echoed", p.Data, p.Metadata)
		},
		"fire_and_forget": func(t *testing.T, ctx context.Context) string {
			if err := c.FireAndForget(ctx, rsocket.Payload{Data: []byte("fnf-from-go")}); err != nil {
				t.Fatal(err)
			}
			if v := next(t, "fnf"); v != "fnf-from-go" {
				t.Fatalf("server got %q", v)
			}
			return `server got "fnf-from-go"`
		},
		"metadata_push": func(t *testing.T, ctx context.Context) string {
			if err := c.MetadataPush(ctx, []byte("push-from-go")); err != nil {
				t.Fatal(err)
			}
			if v := next(t, "push"); v != "push-from-go" {
				t.Fatalf("server got %q", v)
			}
			return `server got "push-from-go"`
		},
		"request_stream": func(t *testing.T, ctx context.Context) string {
			s, err := c.RequestStream(ctx, rsocket.Payload{Data: []byte("100")}, 3)
			if err != nil {
				t.Fatal(err)
			}
			got, err := collect(s)
			want := make([]string, 100)
			for i := range want {
				want[i] = strconv.Itoa(i)
			}
			if err != nil || strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("got %q, %v", got, err)
			}
			return "100 elements \"0\"..\"99\", REQUEST_N 3 at a time"
		},
		"request_channel": func(t *testing.T, ctx context.Context) string {
			ch, err := c.RequestChannel(ctx, rsocket.Payload{Data: []byte("a")}, 2)
			if err != nil {
				t.Fatal(err)
			}
			// Send while reading: rsocket-java's echo asks us (REQUEST_N) for
			// only as much as we asked it for, so sending everything before
			// reading would wait for credits forever.
			sent := make(chan error, 1)
			go func() {
				for _, d := range []string{"b", "c"} {
					if err := ch.Send(rsocket.Payload{Data: []byte(d)}); err != nil {
						sent <- err
						return
					}
				}
				sent <- ch.Complete()
			}()
			got, err := collect(&ch.Stream)
			if err != nil || strings.Join(got, ",") != "a,b,c" {
				t.Fatalf("got %q, %v", got, err)
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("echoed %v while sending, completed both ways", got)
		},
		"error": func(t *testing.T, ctx context.Context) string {
			err := wantApplicationError(t, ctx, c)
			return err.Error()
		},
		"cancel": func(t *testing.T, ctx context.Context) string {
			takeFiveThenCancel(t, ctx, c)
			sent, _ := strconv.Atoi(next(t, "cancel"))
			if sent >= 1000000 {
				t.Fatalf("the server sent all %d", sent)
			}
			return fmt.Sprintf("CANCEL after 5 elements; the server's stream stopped after %d", sent)
		},
		"concurrent_1000": func(t *testing.T, ctx context.Context) string { return concurrentEchoes(t, ctx, c, 1000) },
	}
}
