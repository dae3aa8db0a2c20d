package conn

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// fuzzConfig has small limits so the fuzzer reaches them.
// ByteCredits is on: a client that offers the extension as its second
// frame gets it, one that does not gets plain RSocket.
var fuzzConfig = Config{Role: Server, MaxFrameSize: 128, MaxStreams: 8, MaxPayloadSize: 1024, MaxReassemblyBytes: 2048, ByteCredits: 200}

// FuzzServer feeds arbitrary frames (each preceded by a 24-bit length, as
// on TCP) to a server machine whose application answers every request.
// Whatever arrives, the machine must not panic, must keep its memory
// bounds, and must only send valid frames within MaxFrameSize. Seed corpus:
// testdata/fuzz/FuzzServer (go test -run TestFuzzSeeds -rewrite).
func FuzzServer(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s.data)
	}
	f.Fuzz(fuzzOne)
}

// A second machine with Config.LendFrames gets a copy of each frame: it
// must emit the same events and output as the one that copies (lending
// changes where the bytes live, never what they are), and its frame is
// overwritten after Advance, when nothing may refer to it any more.
func fuzzOne(t *testing.T, in []byte) {
	{
		cfg := fuzzConfig
		cfg.Lease = true // the lease seed's SETUP asks for it
		m, err := New(cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		cfg.LendFrames = true
		lender, err := New(cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Duration(0)
		for i := 0; len(in) >= 3; i++ {
			n := int(in[0])<<16 | int(in[1])<<8 | int(in[2])
			in = in[3:]
			n = min(n, len(in))
			m.Receive(now, in[:n])
			lent := append([]byte(nil), in[:n]...)
			lender.Receive(now, lent)
			in = in[n:]
			now += 100 * time.Millisecond
			if i%8 == 7 {
				m.Tick(now)
				lender.Tick(now)
			}
			sameReady(t, m.Ready(), lender.Ready())
			fuzzCheck(t, m)
			fuzzCheck(t, lender)
			clear(lent)
		}
	}
}

// sameReady fails t unless a and b hold the same output and events.
func sameReady(t *testing.T, a, b Ready) {
	t.Helper()
	if !bytes.Equal(a.Out, b.Out) || len(a.Events) != len(b.Events) {
		t.Fatalf("a lending machine queued %d bytes and %d events, the copying one %d and %d", len(b.Out), len(b.Events), len(a.Out), len(a.Events))
	}
	for i, x := range a.Events {
		y := b.Events[i]
		if x.Kind != y.Kind || x.StreamID != y.StreamID || x.Owned != y.Owned ||
			!bytes.Equal(x.Metadata, y.Metadata) || (x.Metadata == nil) != (y.Metadata == nil) || !bytes.Equal(x.Data, y.Data) {
			t.Fatalf("event %d: lending %v, copying %v", i, y, x)
		}
	}
}

// fuzzCheck checks the bounds, answers requests like an application and
// validates the output.
func fuzzCheck(t *testing.T, m *Machine) {
	for round := 0; round < 2; round++ {
		rd := m.Ready()
		for out := rd.Out; len(out) > 0; {
			f, rest, ok := NextFrame(out)
			if !ok {
				t.Fatalf("partial frame in Out")
			}
			if len(f) > fuzzConfig.MaxFrameSize {
				t.Fatalf("sent a frame of %d bytes", len(f))
			}
			if _, err := frame.Validate(f); err != nil {
				t.Fatalf("sent an invalid frame: %v", err)
			}
			out = rest
		}
		evs := append([]Event(nil), rd.Events...)
		m.Advance()
		for _, ev := range evs {
			switch {
			case ev.Kind == EventSetup && ev.Setup.Lease:
				_ = m.SendLease(0, time.Second, 4)
			case ev.Kind == EventRequest && ev.Interaction == RequestResponse:
				_ = m.SendPayload(ev.StreamID, nil, []byte("response"), true, true)
			case ev.Kind == EventRequest && ev.Interaction == RequestStream:
				_ = m.SendPayload(ev.StreamID, []byte("md"), make([]byte, 300), true, false)
			case ev.Kind == EventRequest && ev.Interaction == RequestChannel:
				_ = m.RequestN(ev.StreamID, 2)
			case ev.Kind == EventRequestN:
				_ = m.SendPayload(ev.StreamID, nil, []byte("more"), true, false)
			case ev.Kind == EventPayload && !ev.Complete:
				_ = m.RequestN(ev.StreamID, 1)
				_ = m.RequestBytes(ev.StreamID, uint32(len(ev.Data)+1))
			}
		}
	}
	if m.NumStreams() > fuzzConfig.MaxStreams {
		t.Fatalf("%d streams", m.NumStreams())
	}
	if m.ReassemblyBytes() > fuzzConfig.MaxReassemblyBytes {
		t.Fatalf("%d reassembly bytes", m.ReassemblyBytes())
	}
}

// FuzzClient feeds arbitrary frames to a client machine that offered the
// byte-credits extension and opened one stream of each kind (ids 1, 3, 5,
// 7). Same guarantees as FuzzServer. Seed corpus: testdata/fuzz/FuzzClient.
func FuzzClient(f *testing.F) {
	for _, s := range fuzzClientSeeds() {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		cfg := fuzzConfig
		cfg.Role = Client
		m, err := New(cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(0); err != nil {
			t.Fatal(err)
		}
		_, _ = m.RequestResponse(0, nil, []byte("rr"))
		_, _ = m.RequestFNF(0, nil, []byte("fnf"))
		_, _ = m.RequestStream(0, 3, []byte("md"), []byte("stream"))
		_, _ = m.RequestChannel(0, 3, nil, []byte("channel"), false)
		fuzzCheck(t, m)
		now := time.Duration(0)
		for i := 0; len(in) >= 3; i++ {
			n := int(in[0])<<16 | int(in[1])<<8 | int(in[2])
			in = in[3:]
			n = min(n, len(in))
			m.Receive(now, in[:n])
			in = in[n:]
			now += 100 * time.Millisecond
			if i%8 == 7 {
				m.Tick(now)
			}
			fuzzCheck(t, m)
		}
	})
}

// fuzzClientSeeds are what a server might send the client of FuzzClient.
func fuzzClientSeeds() []fuzzSeed {
	cat := func(fs ...[]byte) []byte {
		var b []byte
		for _, f := range fs {
			b = must(frame.AppendLengthPrefix(b, len(f)))
			b = append(b, f...)
		}
		return b
	}
	big := make([]byte, 100)
	return []fuzzSeed{
		{"answers", cat(
			extFrame(0, ExtByteCreditsWindow, 64),
			must(frame.AppendPayload(nil, 1, frame.FlagNext|frame.FlagComplete, nil, []byte("rr"))),
			must(frame.AppendPayload(nil, 5, frame.FlagNext, []byte("m"), []byte("s0"))),
			extFrame(7, ExtRequestBytes, 30),
			must(frame.AppendRequestN(nil, 7, 2)),
			must(frame.AppendPayload(nil, 7, frame.FlagNext, nil, []byte("c0"))),
			must(frame.AppendPayload(nil, 5, frame.FlagFollows|frame.FlagNext, nil, big)),
			must(frame.AppendPayload(nil, 5, frame.FlagNext|frame.FlagComplete, nil, big)),
			must(frame.AppendCancel(nil, 7)),
			must(frame.AppendError(nil, 7, frame.ErrorCodeApplicationError, "x")))},
		{"server-requests", cat(
			must(frame.AppendLease(nil, 1000, 3, nil)),
			must(frame.AppendKeepalive(nil, true, 0, []byte("ka"))),
			must(frame.AppendRequestResponse(nil, 2, 0, nil, []byte("from server"))),
			must(frame.AppendRequestStream(nil, 4, 0, 2, nil, []byte("s"))),
			must(frame.AppendRequestChannel(nil, 6, 0, 2, nil, []byte("c"))),
			must(frame.AppendPayload(nil, 6, frame.FlagNext, nil, []byte("c1"))),
			must(frame.AppendMetadataPush(nil, []byte("push"))),
			must(frame.AppendRequestFNF(nil, 8, 0, nil, []byte("fnf"))))},
		{"refused", cat(must(frame.AppendError(nil, 0, frame.ErrorCodeRejectedSetup, "no")))},
		{"odd-and-garbage", append(cat(
			must(frame.AppendSetup(nil, frame.Setup{MajorVersion: 1, KeepaliveInterval: 100, MaxLifetime: 1000})),
			must(frame.AppendResumeOK(nil, 1)),
			must(frame.AppendRequestResponse(nil, 3, 0, nil, []byte("wrong parity"))),
			must(frame.AppendPayload(nil, 5, frame.FlagNext, nil, make([]byte, 2000)))), 0, 0, 2, 0xff, 0xff)},
	}
}

type fuzzSeed struct {
	name string
	data []byte
}

func fuzzSeeds() []fuzzSeed {
	cat := func(fs ...[]byte) []byte {
		var b []byte
		for _, f := range fs {
			b = must(frame.AppendLengthPrefix(b, len(f)))
			b = append(b, f...)
		}
		return b
	}
	setup := must(frame.AppendSetup(nil, frame.Setup{MajorVersion: 1, KeepaliveInterval: 100, MaxLifetime: 1000,
		MetadataMIME: []byte("m"), DataMIME: []byte("d")}))
	big := make([]byte, 100)
	return []fuzzSeed{
		{"setup-only", cat(setup)},
		{"no-setup", cat(must(frame.AppendRequestResponse(nil, 1, 0, nil, []byte("x"))))},
		{"all-interactions", cat(setup,
			must(frame.AppendRequestResponse(nil, 1, 0, []byte("m"), []byte("rr"))),
			must(frame.AppendRequestFNF(nil, 3, 0, nil, []byte("fnf"))),
			must(frame.AppendRequestStream(nil, 5, 0, 3, nil, []byte("s"))),
			must(frame.AppendRequestChannel(nil, 7, 0, 2, nil, []byte("c"))),
			must(frame.AppendPayload(nil, 7, frame.FlagNext, nil, []byte("c1"))),
			must(frame.AppendRequestN(nil, 5, 10)),
			must(frame.AppendPayload(nil, 7, frame.FlagComplete, nil, nil)),
			must(frame.AppendCancel(nil, 5)),
			must(frame.AppendMetadataPush(nil, []byte("push"))),
			must(frame.AppendKeepalive(nil, true, 0, []byte("ka"))))},
		{"fragments", cat(setup,
			must(frame.AppendRequestChannel(nil, 1, frame.FlagFollows, 5, big, nil)),
			must(frame.AppendPayload(nil, 1, frame.FlagFollows|frame.FlagNext, big[:50], big)),
			must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, big)),
			must(frame.AppendRequestN(nil, 1, 3)),
			must(frame.AppendPayload(nil, 1, frame.FlagFollows|frame.FlagNext, nil, big)),
			must(frame.AppendCancel(nil, 1)))},
		{"overflow", cat(setup,
			must(frame.AppendRequestResponse(nil, 1, frame.FlagFollows, nil, make([]byte, 1000))),
			must(frame.AppendRequestResponse(nil, 3, frame.FlagFollows, nil, make([]byte, 1000))),
			must(frame.AppendPayload(nil, 3, frame.FlagFollows|frame.FlagNext, nil, make([]byte, 100))))},
		{"errors", cat(setup,
			must(frame.AppendRequestStream(nil, 1, 0, 1, nil, nil)),
			must(frame.AppendError(nil, 1, frame.ErrorCodeApplicationError, "x")),
			must(frame.AppendError(nil, 0, frame.ErrorCodeInvalidSetup, "ignored")),
			must(frame.AppendExt(nil, 0, frame.FlagIgnore, 5, nil, nil)),
			must(frame.AppendError(nil, 0, frame.ErrorCodeConnectionClose, "drain")))},
		{"garbage", append(cat(setup), 0, 0, 2, 0xff, 0xff)},
		{"resume-first", cat(must(frame.AppendResume(nil, 1, 0, []byte("token"), 0, 0)))},
		{"resume-frames-after-setup", cat(setup,
			must(frame.AppendResume(nil, 1, 0, []byte("token"), 5, 0)),
			must(frame.AppendResumeOK(nil, 7)),
			must(frame.AppendSetup(nil, frame.Setup{MajorVersion: 1, KeepaliveInterval: 100, MaxLifetime: 1000})),
			must(frame.AppendLease(nil, 1000, 3, []byte("md"))),
			must(frame.AppendKeepalive(nil, false, 9, nil)),
			must(frame.AppendRequestResponse(nil, 1, 0, nil, []byte("still works"))))},
		{"byte-credits", cat(setup,
			extFrame(0, ExtByteCreditsWindow, 50),
			must(frame.AppendRequestStream(nil, 1, 0, 5, nil, []byte("s"))),
			extFrame(1, ExtRequestBytes, 400),
			must(frame.AppendRequestChannel(nil, 3, 0, 5, nil, []byte("c"))),
			must(frame.AppendPayload(nil, 3, frame.FlagNext, nil, big)),
			must(frame.AppendPayload(nil, 3, frame.FlagNext, nil, big)),
			must(frame.AppendPayload(nil, 3, frame.FlagNext, nil, big)),
			extFrame(3, ExtRequestBytes, 0),
			extFrame(0, ExtByteCreditsWindow, 70))},
		{"lease", cat(must(frame.AppendSetup(nil, frame.Setup{Header: frame.Header{Flags: frame.FlagLease}, MajorVersion: 1,
			KeepaliveInterval: 100, MaxLifetime: 1000})),
			must(frame.AppendRequestResponse(nil, 1, 0, nil, []byte("rejected"))),
			must(frame.AppendLease(nil, 1000, 3, nil)),
			must(frame.AppendRequestStream(nil, 3, frame.FlagFollows, 2, nil, big)),
			must(frame.AppendPayload(nil, 3, frame.FlagNext, nil, big)))},
	}
}

// TestFuzzSeeds checks the committed seed corpus matches fuzzSeeds (and
// writes it with -rewrite).
func TestFuzzSeeds(t *testing.T) {
	type named struct {
		target string
		fuzzSeed
	}
	var all []named
	for _, s := range fuzzSeeds() {
		all = append(all, named{"FuzzServer", s})
	}
	for _, s := range fuzzClientSeeds() {
		all = append(all, named{"FuzzClient", s})
	}
	for _, s := range all {
		name := filepath.Join("testdata", "fuzz", s.target, s.name)
		content := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s.data)) + ")\n"
		if *rewrite {
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(name); err != nil || string(got) != content {
			t.Errorf("%s missing or stale (run with -rewrite): %v", name, fmt.Sprint(err))
		}
	}
}
