package grpcserve

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// scanLog scans the pieces in turn with a fresh h2scan that collects the
// payload of every frame of the types collect names, and returns what it
// saw, frame by frame: a frame's data is joined whatever the pieces.
func scanLog(pieces [][]byte, collect func(typ byte) bool) string {
	var (
		h    = h2scan{skip: h2ClientPreface}
		log  bytes.Buffer
		data []byte
	)
	frame := func(h *h2scan) bool {
		fmt.Fprintf(&log, "F %d %d %d %d\n", h.typ, h.flags, h.sid, h.left)
		return collect(h.typ)
	}
	onData := func(_ *h2scan, p []byte) {
		if len(p) == 0 {
			panic("empty data")
		}
		data = append(data, p...)
	}
	payload := func(h *h2scan) {
		if len(h.collect) > h2MaxCollect {
			panic("collected past the bound")
		}
		fmt.Fprintf(&log, "P %x\n", h.collect)
	}
	end := func(*h2scan) {
		fmt.Fprintf(&log, "E %x\n", data)
		data = data[:0]
	}
	for _, p := range pieces {
		h.scan(p, frame, onData, payload, end)
	}
	fmt.Fprintf(&log, "left %d %d %d %x\n", h.skip, h.hdrN, h.left, data)
	return log.String()
}

// FuzzStallScan: the stall watch follows any byte stream (a client's, or
// the sink's own) the same however the reads cut it: the same frames, the
// same data without padding, the same collected payloads, and the same
// partial frame at the end. A scan that depended on where a read ended
// would see different windows for the same connection.
func FuzzStallScan(f *testing.F) {
	preface := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	h2frame := func(typ, flags byte, sid uint32, payload []byte) []byte {
		n := len(payload)
		b := []byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags, byte(sid >> 24), byte(sid >> 16), byte(sid >> 8), byte(sid)}
		return append(b, payload...)
	}
	settings := bytes.Repeat([]byte{0, 4, 0, 1, 0, 0}, 50) // 300 bytes: past what is collected
	seed := append(append([]byte{}, preface...), h2frame(h2Settings, 0, 0, []byte{0, 4, 0, 0, 0xff, 0xff})...)
	seed = append(seed, h2frame(h2Headers, 4, 1, []byte("hdr"))...)
	seed = append(seed, h2frame(h2Data, h2FlagPadded, 1, append([]byte{3, 0, 0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o'}, 0, 0, 0))...)
	seed = append(seed, h2frame(h2WindowUpdate, 0, 0, []byte{0, 0, 1, 0})...)
	seed = append(seed, h2frame(h2Settings, 0, 0, settings)...)
	f.Add(seed, []byte{7, 30, 60, 200})
	f.Add(seed, []byte{1, 1, 1, 1, 1, 1})
	f.Add(append(append([]byte{}, preface...), h2frame(h2Data, h2FlagPadded, 3, []byte{200, 1, 2})...), []byte{25, 35})
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		var pieces [][]byte
		rest := stream
		for _, c := range cuts {
			n := min(int(c), len(rest))
			pieces, rest = append(pieces, rest[:n]), rest[n:]
		}
		pieces = append(pieces, rest)
		collect := func(typ byte) bool { return typ == h2Settings || typ == h2WindowUpdate }
		whole, cut := scanLog([][]byte{stream}, collect), scanLog(pieces, collect)
		if whole != cut {
			t.Fatalf("scanned whole:\n%s\nscanned in %d pieces:\n%s", whole, len(pieces), cut)
		}
		// The connection's own bookkeeping, both ways, must not panic
		// whatever the bytes, and its streams stay those the bytes opened.
		sc := newStallConn(&StallWatch{conns: map[*stallConn]struct{}{}}, nil)
		for _, p := range pieces {
			sc.in.scan(p, sc.inFrame, sc.inData, nil, sc.inEnd)
			sc.out.scan(p, sc.outFrame, nil, sc.outPayload, sc.outEnd)
		}
		if len(sc.streams) > len(stream)/9+1 {
			t.Fatalf("%d streams from %d bytes", len(sc.streams), len(stream))
		}
		sc.stalled(time.Unix(0, 0), time.Second)
	})
}
