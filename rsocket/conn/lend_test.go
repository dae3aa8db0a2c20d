package conn

import (
	"bytes"
	"testing"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// With LendFrames a whole request's and PAYLOAD's bytes are the frame's,
// not a copy in the arena: the driver's copy for the application is then
// the only one (before, a 1 MiB upload chunk was copied into the arena
// and again for the application). Without it Receive copies, and the
// caller may reuse the frame at once, as before.
func TestLendFramesLendsTheFramesBytes(t *testing.T) {
	for _, lend := range []bool{true, false} {
		m := newServer(t, Config{LendFrames: lend})
		data := bytes.Repeat([]byte("d"), 100<<10)
		f := must(frame.AppendRequestChannel(nil, 1, 0, 8, []byte("md"), data))
		m.Receive(0, f)
		rd := m.Ready()
		if len(rd.Events) != 1 || rd.Events[0].Kind != EventRequest {
			t.Fatalf("events %v", rd.Events)
		}
		ev := rd.Events[0]
		lent := sameMemory(ev.Data, f)
		if lent != lend || sameMemory(ev.Metadata, f) != lend {
			t.Fatalf("LendFrames %v: data in the frame %v, metadata in the frame %v", lend, lent, sameMemory(ev.Metadata, f))
		}
		if cap(ev.Metadata) != len(ev.Metadata) {
			t.Fatalf("metadata of %d bytes lent with capacity %d: an append by the application would write over the data", len(ev.Metadata), cap(ev.Metadata))
		}
		if ev.Owned {
			t.Fatal("a whole request's bytes are marked Owned: they are the frame's or the arena's")
		}
		if err := m.RequestN(1, 8); err != nil {
			t.Fatal(err)
		}
		m.Advance()
		p := must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, data))
		m.Receive(0, p)
		if evs := m.Ready().Events; len(evs) != 1 || sameMemory(evs[0].Data, p) != lend {
			t.Fatalf("LendFrames %v: PAYLOAD events %v", lend, evs)
		}
		m.Advance()
	}
}

// A reassembled payload's buffers were built for its event alone: it is
// marked Owned, so the driver hands them over instead of copying them,
// and they stay as they were after Advance and the frames that follow.
func TestReassembledPayloadIsOwned(t *testing.T) {
	m := newServer(t, Config{LendFrames: true})
	m.Receive(0, must(frame.AppendRequestChannel(nil, 1, 0, 8, nil, []byte("open"))))
	if err := m.RequestN(1, 8); err != nil {
		t.Fatal(err)
	}
	m.Advance()
	part := bytes.Repeat([]byte("a"), 40<<10)
	m.Receive(0, must(frame.AppendPayload(nil, 1, frame.FlagNext|frame.FlagFollows, []byte("m"), part)))
	m.Receive(0, must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, part)))
	evs := m.Ready().Events
	if len(evs) != 1 || !evs[0].Owned || len(evs[0].Data) != 2*len(part) || string(evs[0].Metadata) != "m" {
		t.Fatalf("events %v (owned %v)", evs, len(evs) == 1 && evs[0].Owned)
	}
	kept := evs[0]
	m.Advance()
	m.Receive(0, must(frame.AppendPayload(nil, 1, frame.FlagNext, []byte("x"), bytes.Repeat([]byte("b"), 80<<10))))
	m.Advance()
	if !bytes.Equal(kept.Data, bytes.Repeat([]byte("a"), 2*len(part))) || string(kept.Metadata) != "m" {
		t.Fatal("an owned payload changed after Advance and the next frame")
	}
}

// TakeOut hands the queued output over: Ready is empty after it, what is
// queued next goes into another buffer, and Advance does not give the
// taken one back to the pool (the driver writes it, then does).
func TestTakeOutHandsTheOutputOver(t *testing.T) {
	m := newServer(t, Config{})
	m.Receive(0, must(frame.AppendRequestChannel(nil, 1, 0, 8, nil, []byte("open"))))
	m.Advance()
	data := bytes.Repeat([]byte("z"), 1<<20)
	if err := m.SendPayload(1, nil, data, true, false); err != nil {
		t.Fatal(err)
	}
	out := m.TakeOut()
	if len(out) < len(data) || len(m.Ready().Out) != 0 {
		t.Fatalf("took %d bytes, %d still queued", len(out), len(m.Ready().Out))
	}
	if err := m.SendPayload(1, nil, []byte("next"), true, false); err != nil {
		t.Fatal(err)
	}
	if sameMemory(m.Ready().Out, out) {
		t.Fatal("output queued after TakeOut went into the taken buffer")
	}
	m.Advance()
	fs := frames(t, out)
	if len(fs) != 1 {
		t.Fatalf("taken output holds %d frames", len(fs))
	}
	p, err := frame.ParsePayload(fs[0])
	if err != nil || !bytes.Equal(p.Data, data) {
		t.Fatalf("taken frame: %v, %d bytes of data", err, len(p.Data))
	}
}

// sameMemory reports whether b lies within the memory of f.
func sameMemory(b, f []byte) bool {
	if len(b) == 0 || len(f) == 0 {
		return false
	}
	f = f[:cap(f)]
	for i := range f {
		if &f[i] == &b[0] {
			return true
		}
	}
	return false
}
