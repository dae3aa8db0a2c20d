package conn

import (
	"bytes"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// spliced is the output with every lent data put back at its place: the
// bytes the driver writes.
func spliced(rd Ready) []byte {
	var b []byte
	at := 0
	for _, l := range rd.Lent {
		b = append(append(b, rd.Out[at:l.At]...), l.Data...)
		at = l.At
	}
	return append(b, rd.Out[at:]...)
}

// SendPayloadLent leaves a large payload's data out of the output
// (Ready.Lent) and the bytes it then takes on the wire are SendPayload's,
// its resume position too; a small payload is copied as by SendPayload.
func TestSendPayloadLentSameBytes(t *testing.T) {
	for _, size := range []int{MinLent - 1, MinLent, 1 << 20} {
		data := bytes.Repeat([]byte("x"), size)
		var outs [2][]byte
		var pos [2]uint64
		for i, lend := range []bool{false, true} {
			m := newServer(t, Config{})
			m.Receive(0, must(frame.AppendRequestChannel(nil, 1, 0, 8, nil, []byte("open"))))
			m.Advance()
			var lent bool
			var err error
			if lend {
				lent, err = m.SendPayloadLent(1, []byte("md"), data, true, false)
			} else {
				err = m.SendPayload(1, []byte("md"), data, true, false)
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := lend && size >= MinLent; lent != want || (len(m.Ready().Lent) > 0) != want {
				t.Fatalf("%d bytes, SendPayloadLent %v: lent %v with %d pieces lent, want %v", size, lend, lent, len(m.Ready().Lent), want)
			}
			if lent && &m.Ready().Lent[0].Data[0] != &data[0] {
				t.Fatal("the lent data is a copy")
			}
			outs[i] = spliced(m.Ready())
			pos[i], _ = m.Positions()
			m.Advance()
			if len(m.Ready().Lent) != 0 {
				t.Fatal("Advance kept the lent data")
			}
		}
		if !bytes.Equal(outs[0], outs[1]) || pos[0] != pos[1] {
			t.Fatalf("%d bytes: lent output of %d bytes at position %d, copied %d at %d", size, len(outs[1]), pos[1], len(outs[0]), pos[0])
		}
	}
}

// A resumable connection retains its frames for replay: nothing is lent.
func TestSendPayloadLentNotWhenResumable(t *testing.T) {
	m, err := New(Config{Role: Client, ResumeToken: []byte("token")}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(0); err != nil {
		t.Fatal(err)
	}
	id, err := m.RequestChannel(time.Duration(0), 1, nil, []byte("open"), false)
	if err != nil {
		t.Fatal(err)
	}
	m.Receive(0, must(frame.AppendRequestN(nil, id, 8)))
	lent, err := m.SendPayloadLent(id, nil, make([]byte, 1<<20), true, false)
	if err != nil {
		t.Fatal(err)
	}
	if lent || len(m.Ready().Lent) != 0 {
		t.Fatal("a resumable connection lent a payload it must retain")
	}
}
