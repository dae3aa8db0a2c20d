package conn

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/rsocket/frame"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.golden from the current behaviour (review the diff!)")

// streamStates puts a fresh server machine in each stream state of the
// sub-machine (stream.go) and returns the stream id. The peer is a client
// (odd ids); streams the server opens get id 2.
var streamStates = []struct {
	name  string
	setup func(t *testing.T, m *Machine) uint32
}{
	{"rr requester", func(t *testing.T, m *Machine) uint32 { return id(m.RequestResponse(0, nil, []byte("q"))) }},
	{"rr responder", func(t *testing.T, m *Machine) uint32 {
		m.Receive(0, must(frame.AppendRequestResponse(nil, 1, 0, nil, []byte("q"))))
		return 1
	}},
	{"stream requester n=2", func(t *testing.T, m *Machine) uint32 { return id(m.RequestStream(0, 2, nil, []byte("q"))) }},
	{"stream requester n=1, credit used", func(t *testing.T, m *Machine) uint32 {
		i := id(m.RequestStream(0, 1, nil, []byte("q")))
		m.Receive(0, must(frame.AppendPayload(nil, i, frame.FlagNext, nil, []byte("x"))))
		return i
	}},
	{"stream requester n=2, half a fragmented PAYLOAD received", func(t *testing.T, m *Machine) uint32 {
		i := id(m.RequestStream(0, 2, nil, []byte("q")))
		m.Receive(0, must(frame.AppendPayload(nil, i, frame.FlagFollows|frame.FlagNext, nil, []byte("x"))))
		return i
	}},
	{"responder, fragmented REQUEST_STREAM n=2 not complete yet", func(t *testing.T, m *Machine) uint32 {
		m.Receive(0, must(frame.AppendRequestStream(nil, 1, frame.FlagFollows, 2, nil, []byte("q"))))
		return 1
	}},
	{"stream responder n=2", func(t *testing.T, m *Machine) uint32 {
		m.Receive(0, must(frame.AppendRequestStream(nil, 1, 0, 2, nil, []byte("q"))))
		return 1
	}},
	{"stream responder n=0 (credits used)", func(t *testing.T, m *Machine) uint32 {
		m.Receive(0, must(frame.AppendRequestStream(nil, 1, 0, 1, nil, []byte("q"))))
		ok(t, m.SendPayload(1, nil, []byte("x"), true, false))
		return 1
	}},
	{"channel requester send=0 recv=2", func(t *testing.T, m *Machine) uint32 {
		return id(m.RequestChannel(0, 2, nil, []byte("q"), false))
	}},
	{"channel requester send=1 recv=2", func(t *testing.T, m *Machine) uint32 {
		i := id(m.RequestChannel(0, 2, nil, []byte("q"), false))
		m.Receive(0, must(frame.AppendRequestN(nil, i, 1)))
		return i
	}},
	{"channel requester, we completed", func(t *testing.T, m *Machine) uint32 {
		return id(m.RequestChannel(0, 2, nil, []byte("q"), true))
	}},
	{"channel requester, peer completed", func(t *testing.T, m *Machine) uint32 {
		i := id(m.RequestChannel(0, 2, nil, []byte("q"), false))
		m.Receive(0, must(frame.AppendPayload(nil, i, frame.FlagComplete, nil, nil)))
		return i
	}},
	{"channel responder send=2 recv=0", func(t *testing.T, m *Machine) uint32 {
		m.Receive(0, must(frame.AppendRequestChannel(nil, 1, 0, 2, nil, []byte("q"))))
		return 1
	}},
	{"channel responder send=2 recv=1", func(t *testing.T, m *Machine) uint32 {
		m.Receive(0, must(frame.AppendRequestChannel(nil, 1, 0, 2, nil, []byte("q"))))
		ok(t, m.RequestN(1, 1))
		return 1
	}},
	{"channel responder, peer completed", func(t *testing.T, m *Machine) uint32 {
		m.Receive(0, must(frame.AppendRequestChannel(nil, 1, frame.FlagComplete, 2, nil, []byte("q"))))
		return 1
	}},
	{"channel responder, we completed, recv=1", func(t *testing.T, m *Machine) uint32 {
		m.Receive(0, must(frame.AppendRequestChannel(nil, 1, 0, 2, nil, []byte("q"))))
		ok(t, m.RequestN(1, 1))
		ok(t, m.Complete(1))
		return 1
	}},
}

// streamInputs are every inbound frame type and application command a
// stream can meet.
var streamInputs = []struct {
	name string
	do   func(m *Machine, id uint32) error
}{
	{"recv PAYLOAD(N)", func(m *Machine, id uint32) error {
		m.Receive(0, must(frame.AppendPayload(nil, id, frame.FlagNext, nil, []byte("p"))))
		return nil
	}},
	{"recv PAYLOAD(C)", func(m *Machine, id uint32) error {
		m.Receive(0, must(frame.AppendPayload(nil, id, frame.FlagComplete, nil, nil)))
		return nil
	}},
	{"recv PAYLOAD(NC)", func(m *Machine, id uint32) error {
		m.Receive(0, must(frame.AppendPayload(nil, id, frame.FlagNext|frame.FlagComplete, nil, []byte("p"))))
		return nil
	}},
	{"recv PAYLOAD(FN)", func(m *Machine, id uint32) error {
		m.Receive(0, must(frame.AppendPayload(nil, id, frame.FlagFollows|frame.FlagNext, nil, []byte("f"))))
		return nil
	}},
	{"recv PAYLOAD > max", func(m *Machine, id uint32) error { // tableMaxPayload + 1 bytes
		m.Receive(0, must(frame.AppendPayload(nil, id, frame.FlagNext, nil, make([]byte, tableMaxPayload+1))))
		return nil
	}},
	{"recv REQUEST_N(1)", func(m *Machine, id uint32) error {
		m.Receive(0, must(frame.AppendRequestN(nil, id, 1)))
		return nil
	}},
	{"recv CANCEL", func(m *Machine, id uint32) error {
		m.Receive(0, must(frame.AppendCancel(nil, id)))
		return nil
	}},
	{"recv ERROR", func(m *Machine, id uint32) error {
		m.Receive(0, must(frame.AppendError(nil, id, frame.ErrorCodeApplicationError, "boom")))
		return nil
	}},
	{"SendPayload(next)", func(m *Machine, id uint32) error { return m.SendPayload(id, nil, []byte("p"), true, false) }},
	{"Complete", func(m *Machine, id uint32) error { return m.Complete(id) }},
	{"RequestN(1)", func(m *Machine, id uint32) error { return m.RequestN(id, 1) }},
	{"Cancel", func(m *Machine, id uint32) error { return m.Cancel(id) }},
	{"SendError", func(m *Machine, id uint32) error {
		return m.SendError(id, frame.ErrorCodeApplicationError, "no")
	}},
}

// tableMaxPayload is the MaxPayloadSize of TestStreamTable's machines:
// every other input is far below it.
const tableMaxPayload = 1000

func id(i uint32, err error) uint32 {
	if err != nil {
		panic(err)
	}
	return i
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func errName(err error) string {
	for _, e := range []error{ErrNoCredits, ErrNotAllowed, ErrUnknownStream, ErrInvalidArgument, ErrClosed} {
		if errors.Is(err, e) {
			return strings.TrimPrefix(e.Error(), "rsocket/conn: ")
		}
	}
	if err != nil {
		return err.Error()
	}
	return "ok"
}

// TestStreamTable runs every stream state × every input and compares the
// outcome (events to the application, frames sent, command result, whether
// the stream is still alive and its credits) with testdata/stream_table.golden.
// The golden file is the reviewed specification of the sub-machine; go test
// -run TestStreamTable -rewrite regenerates it.
func TestStreamTable(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "# state | input | events | frames sent | command | stream after (send/recv credits)\n")
	for _, st := range streamStates {
		fmt.Fprintf(&b, "\n## %s\n", st.name)
		for _, in := range streamInputs {
			m := newServer(t, Config{MaxPayloadSize: tableMaxPayload})
			sid := st.setup(t, m)
			drain(t, m)
			if m.streams[sid] == nil {
				t.Fatalf("%s: stream %d not alive after setup", st.name, sid)
			}
			err := in.do(m, sid)
			fs, evs := drain(t, m)
			after := "gone"
			if s, r, ok := m.Credits(sid); ok {
				st := m.streams[sid]
				after = fmt.Sprintf("live send=%s/%d recv=%s/%d", openStr(st.sendOpen), s, openStr(st.recvOpen), r)
			}
			if c, _ := m.Closed(); c {
				after += " CONNECTION CLOSED"
			}
			fmt.Fprintf(&b, "%-18s | %-28s | %-34s | %-20s | %s\n", in.name, describeEvents(evs), describe(fs), errName(err), after)
		}
	}
	golden(t, "testdata/stream_table.golden", b.String())
}

func openStr(o bool) string {
	if o {
		return "open"
	}
	return "closed"
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *rewrite {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if string(want) != got {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("%s line %d:\n got: %s\nwant: %s", path, i+1, g, w)
			}
		}
	}
}
