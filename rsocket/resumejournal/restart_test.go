package resumejournal

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/faultproxy"
	"github.com/sluicehq/sluice/internal/testkit/testpki"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/internal/resumetest"
)

// Restored sessions with leases and with TLS client identities: the
// driver's rules (a LEASE after RESUME_OK, a RESUME only from the SETUP's
// identity) hold for a session rebuilt from the journal too. The mTLS
// helpers are those of package rsocket's tls_test.go.

// TestLeaseAfterRestoredResume (issue 22 item 5, across a server
// restart): a session with lease, journaled; its lease of 2 requests is
// used up, the server process stops and another starts on the journal.
// The restored session's RESUME_OK is followed by a fresh LEASE, so the
// client's next request goes through (before: the restored session
// granted its LEASE while its link was down, so it was lost, and the next
// came from the renewal timer, 30 min later here).
func TestLeaseAfterRestoredResume(t *testing.T) {
	dir := t.TempDir()
	lease := rsocket.WithLease(time.Hour, 2)
	s1 := startJournalServerOn(t, "tcp", dir, Config{}, rsocket.ResumeConfig{}, lease)
	p := faultproxy.New(t, s1.addr)
	c, err := rsocket.Dial(context.Background(), "tcp://"+p.Addr(), lease,
		rsocket.WithResume(rsocket.ResumeConfig{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), withinBound)
	defer cancel()
	for i := range 2 {
		if _, err := c.RequestResponse(ctx, rsocket.Payload{Data: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	s1.stop()
	p.CutAll()
	s2 := startJournalServerOn(t, "tcp", dir, Config{}, rsocket.ResumeConfig{}, lease)
	p.SetUpstream(s2.addr)
	waitUntil(t, "resume on the restarted server", func() bool { return c.ResumeStats().Resumed >= 1 })
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	got, err := c.RequestResponse(rctx, rsocket.Payload{Data: []byte("after restart")})
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("no LEASE after the restored session's resume: the request still waits")
	}
	if err != nil || string(got.Data) != "after restart" {
		t.Fatalf("request after the restart: %q %v", got.Data, err)
	}
}

// TestResumeJournalBindsTLSIdentity: the client identity of a journaled
// session survives the server's restart: after it, a RESUME with the
// token from another client certificate is refused and the session
// stays in the journal for its owner, who then resumes it.
func TestResumeJournalBindsTLSIdentity(t *testing.T) {
	pki := resumetest.NewMTLS(t, testpki.NewCA(t))
	dir := t.TempDir()
	s1 := startJournalServerOn(t, "tls", dir, Config{}, rsocket.ResumeConfig{}, rsocket.WithTLS(pki.Server))
	p := faultproxy.New(t, s1.addr)
	ctx := context.Background()
	c := dialOwner(t, pki, "tls://"+p.Addr())
	// The restart; the owner cannot reach the new server until the
	// thief has tried.
	p.Refuse(true)
	s1.stop()
	p.CloseAll()
	s2 := startJournalServerOn(t, "tls", dir, Config{}, rsocket.ResumeConfig{}, rsocket.WithTLS(pki.Server))
	store2 := s2.store
	if d := store2.Stats().Dormant; d != 1 {
		t.Fatalf("%d sessions read back, want 1", d)
	}
	resumetest.ThiefResumes(t, s2.addr, pki.Thief, pki.Token, withinBound)
	if st := store2.Stats(); st.Dormant != 1 || st.Restored != 0 {
		t.Fatalf("after the thief's RESUME: %+v; want the session still waiting for its owner", st)
	}
	p.SetUpstream(s2.addr)
	p.Refuse(false)
	var (
		r   rsocket.Payload
		err error
	)
	within(t, "the owner's request after the restart", func() { r, err = c.RequestResponse(ctx, rsocket.Payload{Data: []byte("still mine")}) })
	if err != nil || string(r.Data) != "still mine" {
		t.Fatalf("owner after the restart: %q %v", r.Data, err)
	}
	if st := store2.Stats(); st.Restored != 1 || c.ResumeStats().Resumed != 1 {
		t.Fatalf("store %+v, client %+v: want the owner's session restored and resumed once", st, c.ResumeStats())
	}
}

// dialOwner dials url as m's owner, resumable with its token, and has
// one request answered; the connection closes with the test.
func dialOwner(t *testing.T, m resumetest.MTLS, url string) *rsocket.Conn {
	t.Helper()
	ctx := context.Background()
	c, err := rsocket.Dial(ctx, url, rsocket.WithTLS(m.Owner),
		rsocket.WithResume(rsocket.ResumeConfig{Token: m.Token, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if r, err := c.RequestResponse(ctx, rsocket.Payload{Data: []byte("mine")}); err != nil || string(r.Data) != "mine" {
		t.Fatalf("owner: %q %v", r.Data, err)
	}
	return c
}
