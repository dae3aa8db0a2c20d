package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/faultproxy"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/conn"
)

// cuttingProxy forwards TCP to upstream and cuts each of the first cuts
// connections (both sides closed) once the server has sent after bytes
// through it: a link that breaks mid-stream.
func cuttingProxy(t *testing.T, upstream string, cuts, after int) *faultproxy.Proxy {
	p := faultproxy.New(t, upstream)
	p.CutNext(faultproxy.Cuts{Count: cuts, Down: after})
	return p
}

// TestRSocketCLIResume: `rsocket stream --resume` against `rsocket serve
// --resume` through connections that break three times mid-stream prints
// every element once, in order; without --resume the first break ends it.
func TestRSocketCLIResume(t *testing.T) {
	tcpURL, _ := startRSocketServe(t, "--resume")
	const n = 20_000
	streamThroughCuts(t, tcpURL, n)

	p := cuttingProxy(t, strings.TrimPrefix(tcpURL, "tcp://"), 1, 30_000)
	if code, _, _ := run("rsocket", "stream", "--data", strconv.Itoa(n), "--url", "tcp://"+p.Addr()); code == 0 {
		t.Fatal("without --resume a broken connection went unnoticed")
	}
}

// orderedElements reads a stream of "0", "1", … in parts; an error is
// the stream's end (io.EOF), its failure or an element out of order.
type orderedElements struct {
	s    *rsocket.Stream
	next int
}

func (r *orderedElements) read(upTo int) error {
	for r.next < upTo {
		p, err := r.s.Next()
		if err != nil {
			return err
		}
		if got := string(p.Data); got != strconv.Itoa(r.next) {
			return fmt.Errorf("element %d is %q: lost, reordered or duplicated", r.next, got)
		}
		r.next++
	}
	return nil
}

// TestRSocketResumeAcrossSIGKILL: `sluice rsocket serve --resume-dir` is
// SIGKILLed while it streams 200,000 elements to a resumable client and
// is started again on the same port and directory. The client's
// connection resumes on the new process: every element it had been sent
// arrives once and in order (what was lost in flight is replayed from the
// journal), the stream whose handler died with the process ends with
// "server restarted", and the same connection serves new requests. A
// second client that was idle at the crash resumes too. A SIGTERM
// (a planned restart) keeps the sessions the same way. Two more kills,
// each mid-stream, are survived the same way by the same connections.
// Without --resume-dir the same kill ends both sessions.
func TestRSocketResumeAcrossSIGKILL(t *testing.T) {
	for _, mode := range []string{"journal", "journal-sigterm", "memory"} {
		journal := mode != "memory"
		t.Run(mode, func(t *testing.T) {
			addr, metrics := freeAddr(t), freeAddr(t)
			args := []string{"rsocket", "serve", "--listen", "tcp://" + addr, "--metrics", metrics}
			if journal {
				args = append(args, "--resume-dir", t.TempDir())
			} else {
				args = append(args, "--resume")
			}
			srv := start(t, "rsocket serve", args...)
			// The metrics come up before the journal is read and the
			// listener bound: wait for the listener (dialling once the
			// metrics answered failed under load, "connection refused").
			listening(t, addr)
			ctx := context.Background()
			dial := func() *rsocket.Conn {
				c, err := rsocket.Dial(ctx, "tcp://"+addr, rsocket.WithResume(rsocket.ResumeConfig{MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			c, idle := dial(), dial()
			if _, err := idle.RequestResponse(ctx, rsocket.Payload{Data: []byte("before")}); err != nil {
				t.Fatal(err)
			}
			const items = 200_000
			s, err := c.RequestStream(ctx, rsocket.Payload{Data: []byte(strconv.Itoa(items))}, 256)
			if err != nil {
				t.Fatal(err)
			}
			r := &orderedElements{s: s}
			if err := r.read(2000); err != nil {
				t.Fatal(err)
			}
			if mode == "journal-sigterm" {
				// A planned restart: the sessions stay in the journal.
				_ = srv.cmd.Process.Signal(syscall.SIGTERM)
				_ = srv.cmd.Wait()
				if !strings.Contains(srv.log.String(), "rsocket resume journal") {
					t.Fatalf("server log:\n%s", srv.log)
				}
				srv.start()
			} else {
				srv.restart() // SIGKILL, then the same command again
			}
			end := make(chan error, 1)
			go func() { end <- r.read(items) }()
			select {
			case err = <-end:
			case <-time.After(time.Minute):
				t.Fatalf("no end of the stream after the restart (%d elements)", r.next)
			}
			if !journal {
				for _, cl := range []*rsocket.Conn{c, idle} {
					<-cl.Done()
					if !errors.Is(cl.Err(), conn.ErrResumeRejected) {
						t.Fatalf("without a journal: %v, want the RESUME rejected", cl.Err())
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "server restarted") {
				t.Fatalf("stream after the restart: %v after %d elements; want \"server restarted\"", err, r.next)
			}
			t.Logf("%d elements in order before the stream ended with %q", r.next, err)
			for _, cl := range []*rsocket.Conn{c, idle} {
				resp, err := cl.RequestResponse(ctx, rsocket.Payload{Data: []byte("after")})
				if err != nil || string(resp.Data) != "after" {
					t.Fatalf("request after the restart: %q, %v", resp.Data, err)
				}
				if st := cl.ResumeStats(); st.Resumed != 1 {
					t.Fatalf("resume stats %+v, want one resume", st)
				}
			}
			if got := metric(metrics, "sluice_rsocket_resume_restored_total"); got != 2 {
				t.Fatalf("sluice_rsocket_resume_restored_total = %v, want 2", got)
			}
			if mode != "journal" {
				return
			}
			// Two more kills, each in the middle of a new stream, on the
			// same two connections: each time both resume, the stream
			// ends "server restarted" after its elements in order, and a
			// whole stream then completes.
			for round := 2; round <= 3; round++ {
				s, err = c.RequestStream(ctx, rsocket.Payload{Data: []byte(strconv.Itoa(items))}, 256)
				if err != nil {
					t.Fatal(err)
				}
				r = &orderedElements{s: s}
				if err := r.read(3000); err != nil {
					t.Fatal(err)
				}
				srv.restart()
				go func() { end <- r.read(items) }()
				select {
				case err = <-end:
				case <-time.After(time.Minute):
					t.Fatalf("round %d: no end of the stream after the restart (%d elements)", round, r.next)
				}
				if err == nil || !strings.Contains(err.Error(), "server restarted") {
					t.Fatalf("round %d: stream after the restart: %v after %d elements", round, err, r.next)
				}
				for _, cl := range []*rsocket.Conn{c, idle} {
					whole, err := cl.RequestStream(ctx, rsocket.Payload{Data: []byte("1000")}, 256)
					if err == nil {
						w := &orderedElements{s: whole}
						if err = w.read(1001); errors.Is(err, io.EOF) && w.next == 1000 {
							err = nil
						}
					}
					if err != nil {
						t.Fatalf("round %d: a new stream after the restart: %v", round, err)
					}
					if st := cl.ResumeStats(); st.Resumed != round {
						t.Fatalf("round %d: resume stats %+v", round, st)
					}
				}
			}
		})
	}
}

// TestRSocketCLIResumeByteCredits: TestRSocketCLIResume with the
// byte-credits extension on both ends. The client's EXT[REQUEST_BYTES]
// grants travel on the stream, so they count toward the resume positions
// and are retained for replay like REQUEST_N (docs/rsocket.md "Resume
// positions"). Before, the server counted them as received and the client
// did not count them as sent: the first cut ended the session with
// CONNECTION_ERROR "RESUME_OK position 25 outside the retained 0..11".
func TestRSocketCLIResumeByteCredits(t *testing.T) {
	tcpURL, _ := startRSocketServe(t, "--resume", "--byte-credits", "65536")
	streamThroughCuts(t, tcpURL, 20_000, "--byte-credits", "4096")
}

// streamThroughCuts runs `rsocket stream --resume` of n elements (and
// extra flags) against tcpURL through a proxy that cuts it 3 times, and
// checks every element arrives once, in order, and the cuts happened.
func streamThroughCuts(t *testing.T, tcpURL string, n int, extra ...string) {
	t.Helper()
	p := cuttingProxy(t, strings.TrimPrefix(tcpURL, "tcp://"), 3, 30_000)
	args := append([]string{"rsocket", "stream", "--data", strconv.Itoa(n), "--resume"}, extra...)
	code, out, errs := run(append(args, "--url", "tcp://"+p.Addr())...)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("%d elements, want %d", len(lines), n)
	}
	for i, l := range lines {
		if l != strconv.Itoa(i) {
			t.Fatalf("element %d is %q: lost, reordered or duplicated", i, l)
		}
	}
	if got := p.Cuts(); got != 3 {
		t.Fatalf("the proxy cut %d times, want 3 (the stream must outlast the cuts)", got)
	}
}
