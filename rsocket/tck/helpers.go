package tck

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// T is a running check: its deadline, configuration and connections.
type T struct {
	ctx   context.Context
	cfg   *Config
	obs   *observer
	mu    sync.Mutex
	conns []*raw
}

func (t *T) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.conns {
		c.close()
	}
}

// left is the time a wait may take: until the check's deadline, less a
// fifth of the timeout kept so that the check (not the runner's deadline)
// gives the verdict, with its detail, and can still run a short follow-up.
func (t *T) left() time.Duration {
	d, ok := t.ctx.Deadline()
	if !ok {
		return t.cfg.Timeout
	}
	return max(time.Until(d)-t.cfg.Timeout/5, time.Millisecond)
}

// rest is all the time until the deadline, for a last follow-up.
func (t *T) rest() time.Duration {
	d, _ := t.ctx.Deadline()
	return max(time.Until(d)-t.cfg.Timeout/50, time.Millisecond)
}

// dial connects without sending anything.
func (t *T) dial() (*raw, error) {
	c, err := dial(t.ctx, t.cfg, t.obs)
	if err != nil {
		return nil, fmt.Errorf("cannot connect: %v", err)
	}
	t.mu.Lock()
	t.conns = append(t.conns, c)
	t.mu.Unlock()
	return c, nil
}

// setup is the runner's SETUP, changed by mod.
func (t *T) setup(mod func(*frame.Setup)) []byte {
	s := frame.Setup{
		MajorVersion: frame.ProtocolMajor, MinorVersion: frame.ProtocolMinor,
		KeepaliveInterval: 30000, MaxLifetime: 90000,
		MetadataMIME: []byte(t.cfg.MetadataMIME), DataMIME: []byte(t.cfg.DataMIME),
	}
	if mod != nil {
		mod(&s)
	}
	return must(frame.AppendSetup(nil, s))
}

// open connects and sends the runner's SETUP.
func (t *T) open() (*raw, error) {
	c, err := t.dial()
	if err != nil {
		return nil, err
	}
	if err := c.send(t.setup(nil)); err != nil {
		return nil, fmt.Errorf("sending SETUP: %v", err)
	}
	return c, nil
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// withStream rewrites a frame's stream id (for frames the codec only
// writes on stream 0).
func withStream(f []byte, id uint32) []byte {
	f[0], f[1], f[2], f[3] = byte(id>>24)&0x7F, byte(id>>16), byte(id>>8), byte(id)
	return f
}

// rawFrame builds a frame of any type: header and body as given.
func rawFrame(stream uint32, t uint8, flags frame.Flags, body []byte) []byte {
	b := []byte{byte(stream >> 24), byte(stream >> 16), byte(stream >> 8), byte(stream),
		byte(uint16(t)<<2 | uint16(flags)>>8), byte(flags)}
	return append(b, body...)
}

// connErr is an ERROR on stream 0 that ended the connection.
type connErr struct {
	code frame.ErrorCode
	msg  string
}

func (e *connErr) Error() string { return fmt.Sprintf("ERROR[%v] %q on stream 0", e.code, e.msg) }

// awaitConnError waits for an ERROR on stream 0 (skipping other frames) or
// the end of the connection or check.
func (t *T) awaitConnError(c *raw) (*connErr, error) {
	for {
		f, err := c.next(t.left())
		if err != nil {
			return nil, err
		}
		h, _ := frame.ParseHeader(f)
		if h.Type == frame.TypeError && h.StreamID == 0 {
			e, err := frame.ParseError(f)
			if err != nil {
				return nil, fmt.Errorf("malformed ERROR: %v", err)
			}
			return &connErr{e.Code, e.Message()}, nil
		}
	}
}

var aliveN atomic.Int64

// alive checks the connection still works: a KEEPALIVE with R and unique
// data must come back without R and with that data (application
// independent). An ERROR on stream 0 or the end of the connection is
// reported.
func (t *T) alive(c *raw) error { return t.aliveWithin(c, t.left()) }

// aliveWithin is alive with a wait of d.
func (t *T) aliveWithin(c *raw, d time.Duration) error {
	data := []byte("tck-alive-" + strconv.FormatInt(aliveN.Add(1), 10))
	// A server that refuses may close before our KEEPALIVE is written; its
	// ERROR can still be waiting to be read, so a failed send is reported
	// only after the frames already received are drained.
	sendErr := c.send(must(frame.AppendKeepalive(nil, true, 0, data)))
	for {
		f, err := c.next(d)
		if err != nil && sendErr != nil {
			return fmt.Errorf("the connection is gone: %v", sendErr)
		}
		if errors.Is(err, errTimeout) {
			return fmt.Errorf("the connection stopped answering (no KEEPALIVE echo within %v)", d.Round(time.Millisecond))
		}
		if err != nil {
			return fmt.Errorf("the server closed the connection (%v)", err)
		}
		h, _ := frame.ParseHeader(f)
		switch {
		case h.Type == frame.TypeError && h.StreamID == 0:
			e, _ := frame.ParseError(f)
			return &connErr{e.Code, e.Message()}
		case h.Type == frame.TypeKeepalive && !h.Has(frame.FlagRespond):
			k, err := frame.ParseKeepalive(f)
			if err == nil && string(k.Data) == string(data) {
				return nil
			}
		}
	}
}

// response is a stream's answer: a (reassembled) payload, or an ERROR.
type response struct {
	md, data []byte
	hasMD    bool
	next     bool
	complete bool
	err      *frame.ErrorFrame
	// followsComplete: the last frame had F and C (F ignored, payload ended).
	followsComplete bool
}

// awaitStream returns the next complete item on stream id: a reassembled
// PAYLOAD or an ERROR; other streams' frames are skipped, an ERROR on
// stream 0 is an error. Fragment order is checked (metadata first).
func (t *T) awaitStream(c *raw, id uint32, d time.Duration) (*response, error) {
	var asm *response
	sawData, frags := false, 0
	for {
		f, err := c.next(d)
		if err != nil {
			return nil, err
		}
		h, _ := frame.ParseHeader(f)
		if h.Type == frame.TypeError && h.StreamID == 0 {
			e, _ := frame.ParseError(f)
			return nil, &connErr{e.Code, e.Message()}
		}
		if h.StreamID != id {
			continue
		}
		switch h.Type {
		case frame.TypeError:
			e, err := frame.ParseError(f)
			if err != nil {
				return nil, fmt.Errorf("malformed ERROR on stream %d: %v", id, err)
			}
			return &response{err: &e}, nil
		case frame.TypePayload:
			p, err := frame.ParsePayload(f)
			if err != nil {
				return nil, fmt.Errorf("malformed PAYLOAD on stream %d: %v", id, err)
			}
			if asm == nil {
				asm = &response{}
			}
			frags++
			if p.Metadata != nil {
				if sawData && len(p.Metadata) > 0 {
					t.obs.fragment(fmt.Sprintf("stream %d: metadata after data", id))
				}
				asm.hasMD = true
				asm.md = append(asm.md, p.Metadata...)
			}
			if len(p.Data) > 0 {
				sawData = true
			}
			asm.data = append(asm.data, p.Data...)
			asm.next = asm.next || p.Next()
			if p.Follows() {
				continue
			}
			asm.followsComplete = h.Has(frame.FlagFollows | frame.FlagComplete)
			if frags > 1 {
				t.obs.fragment("")
			}
			asm.complete = p.Complete()
			return asm, nil
		}
	}
}

// items collects the elements of stream id until it completes or fails,
// or quiet passes with nothing on it.
func (t *T) items(c *raw, id uint32, quiet time.Duration) (got []string, complete bool, e *frame.ErrorFrame, err error) {
	for {
		r, err := t.awaitStream(c, id, quiet)
		if errors.Is(err, errTimeout) {
			return got, false, nil, nil
		}
		if err != nil {
			return got, false, nil, err
		}
		if r.err != nil {
			return got, false, r.err, nil
		}
		if r.next {
			got = append(got, string(r.data))
		}
		if r.complete {
			return got, true, nil, nil
		}
	}
}

// seq is "0".."n-1" as the echo contract streams them.
func seq(from, to int) []string {
	var s []string
	for i := from; i < to; i++ {
		s = append(s, strconv.Itoa(i))
	}
	return s
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func short(s []string) string {
	if len(s) <= 8 {
		return fmt.Sprint(s)
	}
	return fmt.Sprintf("%v … %v (%d)", s[:4], s[len(s)-2:], len(s))
}
