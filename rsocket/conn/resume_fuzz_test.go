package conn

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

const fuzzResumeBuffer = 512

func lp(fs ...[]byte) []byte {
	var b []byte
	for _, f := range fs {
		b = append(b, byte(len(f)>>16), byte(len(f)>>8), byte(len(f)))
		b = append(b, f...)
	}
	return b
}

// resumeFuzzSeeds: a resumable SETUP, requests, keepalives with positions,
// and RESUME frames (each one cuts the transport first, in FuzzResumeServer).
func resumeFuzzSeeds() [][]byte {
	setup := must(frame.AppendSetup(nil, frame.Setup{MajorVersion: 1, KeepaliveInterval: 1000, MaxLifetime: 5000, ResumeToken: []byte("t")}))
	rs := must(frame.AppendRequestStream(nil, 1, 0, 5, nil, []byte("s")))
	ka := must(frame.AppendKeepalive(nil, true, 0, nil))
	ka2 := must(frame.AppendKeepalive(nil, false, 1<<40, nil))
	res := must(frame.AppendResume(nil, 1, 0, []byte("t"), 0, 0))
	resFar := must(frame.AppendResume(nil, 1, 0, []byte("t"), 1<<20, 7))
	resOther := must(frame.AppendResume(nil, 1, 0, []byte("x"), 0, 0))
	rn := must(frame.AppendRequestN(nil, 1, 100))
	return [][]byte{
		lp(setup, rs, ka, res, rn, ka, res),
		lp(setup, rs, rn, rn, resFar, rs),
		lp(setup, rs, ka2, resOther),
		lp(setup, res, res, ka),
	}
}

// FuzzResumeServer: a resumable server session fed arbitrary frames; every
// RESUME frame in the input first cuts the transport and goes to
// AcceptResume. The machine must not panic, must keep the retained bytes
// within ResumeBufferBytes, and send only valid frames.
func FuzzResumeServer(f *testing.F) {
	for _, s := range resumeFuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		cfg := fuzzConfig
		cfg.Resume, cfg.ResumeBufferBytes = true, fuzzResumeBuffer
		m, err := New(cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Duration(0)
		for i := 0; len(in) >= 3; i++ {
			n := int(in[0])<<16 | int(in[1])<<8 | int(in[2])
			in = in[3:]
			n = min(n, len(in))
			b := in[:n]
			in = in[n:]
			if h, err := frame.ParseHeader(b); err == nil && h.Type == frame.TypeResume && m.Resumable() {
				m.TransportClosed(errors.New("cut"))
				fuzzCheck(t, m)
				m.AcceptResume(now, b)
			} else {
				m.Receive(now, b)
			}
			now += 100 * time.Millisecond
			if i%8 == 7 {
				m.Tick(now)
			}
			fuzzCheck(t, m)
			if r, _ := m.RetainedBytes(); r > fuzzResumeBuffer {
				t.Fatalf("retained %d bytes", r)
			}
		}
	})
}

// FuzzResumeClient: a resumable client fed arbitrary frames; an empty frame
// in the input cuts the transport and reconnects (RESUME goes out).
func FuzzResumeClient(f *testing.F) {
	ok := must(frame.AppendResumeOK(nil, 0))
	pl := must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, []byte("x")))
	rej := must(frame.AppendError(nil, 0, frame.ErrorCodeRejectedResume, "no"))
	f.Add(lp(pl, nil, ok, pl, nil, rej))
	f.Add(lp(nil, pl, ok, nil, must(frame.AppendResumeOK(nil, 1<<30))))
	f.Fuzz(func(t *testing.T, in []byte) {
		cfg := fuzzConfig
		cfg.Role, cfg.ResumeToken, cfg.ResumeBufferBytes = Client, []byte("t"), fuzzResumeBuffer
		m, err := New(cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		_ = m.Start(0)
		_, _ = m.RequestStream(0, 3, nil, []byte("stream"))
		_, _ = m.RequestChannel(0, 3, nil, []byte("channel"), false)
		fuzzCheck(t, m)
		now := time.Duration(0)
		for i := 0; len(in) >= 3; i++ {
			n := int(in[0])<<16 | int(in[1])<<8 | int(in[2])
			in = in[3:]
			n = min(n, len(in))
			b := in[:n]
			in = in[n:]
			if n == 0 {
				m.TransportClosed(errors.New("cut"))
				fuzzCheck(t, m)
				_ = m.Reconnected(now)
			} else {
				m.Receive(now, b)
			}
			now += 100 * time.Millisecond
			if i%8 == 7 {
				m.Tick(now)
			}
			fuzzCheck(t, m)
			if r, _ := m.RetainedBytes(); r > fuzzResumeBuffer {
				t.Fatalf("retained %d bytes", r)
			}
		}
	})
}
