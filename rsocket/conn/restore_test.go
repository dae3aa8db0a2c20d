package conn

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// TestRestoreResumesAndEndsOrphans: a client streams from the server and
// has a request-response answered; the server's image is taken, then
// more is sent that the client never gets (lost with the process), and
// the process dies. The restored server takes the client's RESUME:
// RESUME_OK, the frames the client lacks replayed once and in order,
// then the stream that was open ends with APPLICATION_ERROR "server
// restarted", and a new request reaches the restored server.
func TestRestoreResumesAndEndsOrphans(t *testing.T) {
	p := resumePair(t, Config{})
	sid, _ := p.c.RequestStream(p.now, 100, nil, []byte("s"))
	p.pump()
	var srvStream uint32
	for _, e := range p.sEv {
		if e.Kind == EventRequest && e.Interaction == RequestStream {
			srvStream = e.StreamID
		}
	}
	if srvStream != sid {
		t.Fatalf("server saw stream %d, client opened %d", srvStream, sid)
	}
	for i := 0; i < 3; i++ {
		if err := p.s.SendPayload(sid, nil, []byte{'a' + byte(i)}, true, false); err != nil {
			t.Fatal(err)
		}
	}
	p.pump() // the client has a, b, c
	if err := p.s.SendPayload(sid, nil, []byte("d"), true, false); err != nil {
		t.Fatal(err)
	}
	img, err := p.s.ResumeImage()
	if err != nil {
		t.Fatal(err)
	}
	drain(t, p.s) // "d" lost on the wire with the old process
	// The image is a copy: what the old machine does after does not
	// change it.
	_ = p.s.SendPayload(sid, nil, []byte("after the image"), true, false)
	drain(t, p.s)

	scfg := p.s.cfg
	s2, err := Restore(scfg, img, p.now)
	if err != nil {
		t.Fatal(err)
	}
	if !s2.Resumable() || s2.NumStreams() != 1 {
		t.Fatalf("restored: resumable %v, %d streams", s2.Resumable(), s2.NumStreams())
	}
	p.s = s2
	if !p.resumeAfterCut(t, false) {
		sf, _ := drain(t, p.s)
		t.Fatalf("restored server refused the RESUME: %s", describe(sf))
	}
	p.cEv = nil
	p.pump()
	var got []string
	var ended *Event
	for i, e := range p.cEv {
		switch {
		case e.Kind == EventPayload && e.StreamID == sid:
			got = append(got, string(e.Data))
		case e.Kind == EventError && e.StreamID == sid:
			ended = &p.cEv[i]
		}
	}
	if strings.Join(got, ",") != "d" {
		t.Fatalf("after the resume the client got %q, want the lost \"d\" once", got)
	}
	if ended == nil || ended.Code != frame.ErrorCodeApplicationError || !strings.Contains(ended.Message, "server restarted") {
		t.Fatalf("the orphaned stream: %+v; want APPLICATION_ERROR \"server restarted\"", ended)
	}
	if p.s.NumStreams() != 0 {
		t.Fatalf("%d streams left on the restored server", p.s.NumStreams())
	}
	// The session goes on: a new request reaches the restored server.
	p.sEv = nil
	rid, err := p.c.RequestResponse(p.now, nil, []byte("again"))
	if err != nil {
		t.Fatal(err)
	}
	p.pump()
	if len(p.sEv) == 0 || p.sEv[0].Kind != EventRequest || p.sEv[0].StreamID != rid || string(p.sEv[0].Data) != "again" {
		t.Fatalf("restored server events %s", describeEvents(p.sEv))
	}
	sent, recv := p.s.Positions()
	csent, crecv := p.c.Positions()
	if sent != crecv || recv != csent {
		t.Fatalf("positions: server sent %d received %d, client sent %d received %d", sent, recv, csent, crecv)
	}
}

// TestRestoreEndsRequesterStreams: a stream the server requested from
// the client is cancelled after the restore (its requester is gone).
func TestRestoreEndsRequesterStreams(t *testing.T) {
	p := resumePair(t, Config{})
	id, err := p.s.RequestStream(p.now, 10, nil, []byte("from the server"))
	if err != nil {
		t.Fatal(err)
	}
	p.pump()
	img, err := p.s.ResumeImage()
	if err != nil {
		t.Fatal(err)
	}
	s2, err := Restore(p.s.cfg, img, p.now)
	if err != nil {
		t.Fatal(err)
	}
	p.s = s2
	if !p.resumeAfterCut(t, false) {
		t.Fatal("refused")
	}
	p.cEv = nil
	p.pump()
	cancelled := false
	for _, e := range p.cEv {
		cancelled = cancelled || (e.Kind == EventCancel && e.StreamID == id)
	}
	if !cancelled {
		t.Fatalf("client events %s; want CANCEL of stream %d", describeEvents(p.cEv), id)
	}
	// The restored server's own ids go on after the image's.
	id2, err := p.s.RequestResponse(p.now, nil, []byte("x"))
	if err != nil || id2 <= id {
		t.Fatalf("next server stream %d (%v), want above %d", id2, err, id)
	}
}

// TestRestoreExpires: a restored session nobody resumes closes after the
// session lifetime, like one whose connection broke.
func TestRestoreExpires(t *testing.T) {
	p := resumePair(t, Config{})
	img, err := p.s.ResumeImage()
	if err != nil {
		t.Fatal(err)
	}
	s2, err := Restore(p.s.cfg, img, 0)
	if err != nil {
		t.Fatal(err)
	}
	s2.Tick(s2.cfg.ResumeSessionLifetime - 1)
	if closed, _ := s2.Closed(); closed {
		t.Fatal("closed before the session lifetime")
	}
	s2.Tick(s2.cfg.ResumeSessionLifetime)
	if closed, err := s2.Closed(); !closed || !errors.Is(err, ErrResumeExpired) {
		t.Fatalf("closed %v (%v), want ErrResumeExpired", closed, err)
	}
}

// TestRestoreRejectsBadImages: a damaged image is an error, never a
// panic or a session that replays garbage; so is a client configuration
// or a session that is not resumable.
func TestRestoreRejectsBadImages(t *testing.T) {
	p := resumePair(t, Config{})
	p.c.RequestStream(p.now, 10, nil, []byte("x"))
	p.pump()
	_ = p.s.SendPayload(p.sEv[len(p.sEv)-1].StreamID, nil, []byte("payload"), true, false)
	p.pump()
	good, err := p.s.ResumeImage()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(p.s.cfg, good, 0); err != nil {
		t.Fatalf("the good image: %v", err)
	}
	bad := map[string]func(*ResumeImage){
		"no token":             func(i *ResumeImage) { i.Token = nil },
		"no keepalive":         func(i *ResumeImage) { i.KeepaliveInterval = 0 },
		"retained truncated":   func(i *ResumeImage) { i.Retained = i.Retained[:len(i.Retained)-1] },
		"retained vs position": func(i *ResumeImage) { i.SentPos++ },
		"start after sent":     func(i *ResumeImage) { i.RetainedStart = i.SentPos + 1 },
		"client's next id":     func(i *ResumeImage) { i.NextID = 3 },
		"stream id 0":          func(i *ResumeImage) { i.Streams = append(i.Streams, ImageStream{ID: 0, Kind: RequestStream}) },
		"duplicate stream":     func(i *ResumeImage) { i.Streams = append(i.Streams, i.Streams[0]) },
		"unknown kind":         func(i *ResumeImage) { i.Streams[0].Kind = 9 },
		"stream-0 frame retained": func(i *ResumeImage) {
			ka := must(frame.AppendKeepalive(nil, false, 0, nil))
			f := append(must(frame.AppendLengthPrefix(nil, len(ka))), ka...)
			i.Retained = append(append([]byte(nil), i.Retained...), f...)
			i.SentPos += uint64(len(ka))
		},
	}
	for name, mutate := range bad {
		img := good
		img.Token = append([]byte(nil), good.Token...)
		img.Retained = append([]byte(nil), good.Retained...)
		img.Streams = append([]ImageStream(nil), good.Streams...)
		mutate(&img)
		if _, err := Restore(p.s.cfg, img, 0); !errors.Is(err, ErrNotRestorable) {
			t.Errorf("%s: %v, want ErrNotRestorable", name, err)
		}
	}
	if _, err := Restore(Config{Role: Client}, good, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("client configuration: %v", err)
	}
	if _, err := p.c.ResumeImage(); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("a client's image: %v", err)
	}
}

// TestRestoreEndsOrphansInOrder: a restored session's streams end in id
// order, run after run: the pure machine's output does not depend on map
// iteration (a seeded simulation must replay the same frames).
func TestRestoreEndsOrphansInOrder(t *testing.T) {
	for run := 0; run < 20; run++ {
		p := resumePair(t, Config{})
		var want []uint32
		for i := 0; i < 8; i++ {
			id, err := p.c.RequestStream(p.now, 10, nil, []byte("s"))
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		p.pump()
		img, err := p.s.ResumeImage()
		if err != nil {
			t.Fatal(err)
		}
		if p.s, err = Restore(p.s.cfg, img, p.now); err != nil {
			t.Fatal(err)
		}
		if !p.resumeAfterCut(t, false) {
			t.Fatal("refused")
		}
		p.cEv = nil
		p.pump()
		var got []uint32
		for _, e := range p.cEv {
			if e.Kind == EventError {
				got = append(got, e.StreamID)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("run %d: streams ended in order %v, want %v", run, got, want)
		}
	}
}

// TestResumeCursorTail: an image plus the tails since each cursor is the
// image taken at the end (what a persisted session rebuilds), also when
// the retained buffer dropped frames between two cursors; the streams
// version moves when a stream opens or ends, and only then.
func TestResumeCursorTail(t *testing.T) {
	p := resumePair(t, Config{})
	sid, _ := p.c.RequestStream(p.now, 1000, nil, []byte("s"))
	p.pump()
	img, err := p.s.ResumeImage()
	if err != nil {
		t.Fatal(err)
	}
	cur := p.s.ResumeCursor()
	apply := func() {
		t.Helper()
		start, tail := p.s.ResumeTail(cur)
		now := p.s.ResumeCursor()
		if start == img.SentPos {
			img.Retained = append(img.Retained, tail...)
		} else {
			if start < img.SentPos {
				t.Fatalf("tail starts at %d, before the persisted end %d", start, img.SentPos)
			}
			img.Retained = append([]byte(nil), tail...)
			img.RetainedStart = start
		}
		for img.RetainedStart < now.RetainedStart {
			f, rest, ok := NextFrame(img.Retained)
			if !ok {
				t.Fatal("retained frames do not line up with the cursor")
			}
			img.RetainedStart += uint64(len(f))
			img.Retained = rest
		}
		img.SentPos, img.RecvPos, img.NextID = now.SentPos, now.RecvPos, now.NextID
		if now.StreamsVersion != cur.StreamsVersion {
			img.Streams = p.s.OpenStreams(img.Streams[:0])
		}
		cur = now
	}
	check := func(what string) {
		t.Helper()
		want, err := p.s.ResumeImage()
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(want) != fmt.Sprint(img) {
			t.Fatalf("%s: rebuilt image\n%+v\nwant\n%+v", what, img, want)
		}
	}
	for i := 0; i < 5; i++ {
		_ = p.s.SendPayload(sid, nil, []byte(fmt.Sprintf("item %d", i)), true, false)
	}
	drain(t, p.s)
	apply()
	check("after 5 items")
	v := cur.StreamsVersion
	apply() // nothing new: an empty tail
	check("unchanged")
	if cur.StreamsVersion != v {
		t.Fatal("streams version moved with no stream opened or ended")
	}
	// More than the buffer holds between two cursors: the tail is the
	// whole (trimmed) buffer.
	p.s.SetResumeBufferBytes(64)
	for i := 0; i < 20; i++ {
		_ = p.s.SendPayload(sid, nil, []byte(fmt.Sprintf("burst %d", i)), true, false)
	}
	drain(t, p.s)
	apply()
	check("after a burst beyond the buffer")
	_ = p.s.SendPayload(sid, nil, nil, false, true) // the stream completes
	drain(t, p.s)
	apply()
	check("after the stream ended")
	if cur.StreamsVersion == v || len(img.Streams) != 0 {
		t.Fatalf("streams version %d (was %d), streams %v after the stream ended", cur.StreamsVersion, v, img.Streams)
	}
}
