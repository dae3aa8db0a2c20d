package conn

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// frames splits a Ready.Out into frames (copied).
func frames(t testing.TB, out []byte) [][]byte {
	t.Helper()
	var fs [][]byte
	for len(out) > 0 {
		f, rest, ok := NextFrame(out)
		if !ok {
			t.Fatalf("partial frame in output: %x", out)
		}
		fs = append(fs, append([]byte(nil), f...))
		out = rest
	}
	return fs
}

// drain takes the machine's output: frames and events (copied).
func drain(t testing.TB, m *Machine) ([][]byte, []Event) {
	t.Helper()
	rd := m.Ready()
	fs := frames(t, rd.Out)
	evs := make([]Event, len(rd.Events))
	for i, e := range rd.Events {
		e.Metadata = cloneNil(e.Metadata)
		e.Data = cloneNil(e.Data)
		evs[i] = e
	}
	m.Advance()
	return fs, evs
}

func cloneNil(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// describe renders frames in a compact form: "PAYLOAD(3,NC) ERROR(0,CONNECTION_ERROR)".
func describe(fs [][]byte) string {
	var parts []string
	for _, f := range fs {
		h, err := frame.ParseHeader(f)
		if err != nil {
			parts = append(parts, "BAD")
			continue
		}
		s := fmt.Sprintf("%s(%d", h.Type, h.StreamID)
		switch h.Type {
		case frame.TypeError:
			e, _ := frame.ParseError(f)
			s += "," + e.Code.String()
		case frame.TypeRequestN:
			r, _ := frame.ParseRequestN(f)
			s += fmt.Sprintf(",%d", r.N)
		case frame.TypeKeepalive:
			if h.Has(frame.FlagRespond) {
				s += ",R"
			} else {
				s += ","
			}
		case frame.TypePayload, frame.TypeRequestChannel, frame.TypeRequestStream, frame.TypeRequestResponse:
			s += "," + flagString(h.Flags)
		case frame.TypeExt:
			if e, err := frame.ParseExt(f); err == nil {
				if t, v, ok := parseExtU32(e); ok && t == ExtRequestBytes {
					s += fmt.Sprintf(",REQUEST_BYTES %d", v)
				} else if ok {
					s += fmt.Sprintf(",WINDOW %d", v)
				}
			}
		}
		parts = append(parts, s+")")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func flagString(f frame.Flags) string {
	var s string
	for _, x := range []struct {
		f frame.Flags
		c string
	}{{frame.FlagMetadata, "M"}, {frame.FlagFollows, "F"}, {frame.FlagComplete, "C"}, {frame.FlagNext, "N"}} {
		if f&x.f != 0 {
			s += x.c
		}
	}
	return s
}

func describeEvents(evs []Event) string {
	var parts []string
	for _, e := range evs {
		s := e.Kind.String()
		switch e.Kind {
		case EventPayload:
			s += "("
			if e.Next {
				s += "N"
			}
			if e.Complete {
				s += "C"
			}
			s += ")"
		case EventError:
			s += "(" + e.Code.String()
			if e.Local {
				s += ",local"
			}
			s += ")"
		case EventRequestN:
			if e.Bytes > 0 {
				s += fmt.Sprintf("(bytes %d)", e.Bytes)
			} else {
				s += fmt.Sprintf("(%d)", e.N)
			}
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// must unwraps an encoder's result; an encoding error is a bug in the test.
func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func setupFrame(t testing.TB) []byte {
	return must(frame.AppendSetup(nil, frame.Setup{MajorVersion: 1, KeepaliveInterval: 1000, MaxLifetime: 5000,
		MetadataMIME: []byte("m"), DataMIME: []byte("d")}))
}

// newServer returns a server that accepted a SETUP (keepalive 1s, lifetime 5s).
func newServer(t testing.TB, cfg Config) *Machine {
	t.Helper()
	cfg.Role = Server
	m, err := New(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	m.Receive(0, setupFrame(t))
	_, evs := drain(t, m)
	if len(evs) != 1 || evs[0].Kind != EventSetup {
		t.Fatalf("setup: %v", evs)
	}
	return m
}

// pair is a client and a server wired back to back.
type pair struct {
	t      testing.TB
	c, s   *Machine
	cEv    []Event
	sEv    []Event
	now    time.Duration
	cFrame [][]byte // every frame the client sent
	sFrame [][]byte
}

func newPair(t testing.TB, ccfg, scfg Config) *pair {
	t.Helper()
	ccfg.Role, scfg.Role = Client, Server
	c, err := New(ccfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(scfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(0); err != nil {
		t.Fatal(err)
	}
	p := &pair{t: t, c: c, s: s}
	p.pump()
	return p
}

// pump delivers frames both ways until neither side has output.
func (p *pair) pump() {
	for i := 0; i < 1000 && (p.c.HasReady() || p.s.HasReady()); i++ {
		cf, cev := drain(p.t, p.c)
		sf, sev := drain(p.t, p.s)
		p.cEv = append(p.cEv, cev...)
		p.sEv = append(p.sEv, sev...)
		p.cFrame = append(p.cFrame, cf...)
		p.sFrame = append(p.sFrame, sf...)
		for _, f := range cf {
			p.s.Receive(p.now, f)
		}
		for _, f := range sf {
			p.c.Receive(p.now, f)
		}
	}
}
