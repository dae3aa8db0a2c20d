// Package rsockethostile is an RSocket client that misbehaves on purpose:
// it opens connections to a server and, on each, does one thing a careless
// or hostile peer does (says nothing, stops in the middle of a frame,
// never reads what it asked for, floods). It speaks raw frames over TCP
// (tcp://) or over a hand-made WebSocket (ws://), so that it can send what
// the rsocket package never would, such as half a WebSocket message.
//
// It is the reproduction behind docs/rsocket.md's hostile-client table
// (`sluice rsocket hostile`, scripts/hostile-rsocket.sh) and the raw-frame
// tests that run in CI (hostile_test.go). What every hostile-client run
// shares (counting connections, the heap sampler, the well-behaved
// client's loop) is internal/lab/hostile's. Every connection is bounded in
// time (Config.Duration) and every flood in frames (Config.MaxFrames).
package rsockethostile

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/lab/hostile"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// Mode is one misbehaviour.
type Mode string

// The misbehaviours. Every mode but Silent sends a SETUP first (with a
// max lifetime of 24 days, so that keepalive does not end the connection
// early); the floods then write as fast as the server takes and never
// read a byte.
const (
	// Silent connects and sends nothing.
	Silent Mode = "silent"
	// HalfFrame sends the length prefix of a frame of FrameSize bytes of
	// data and half of the frame, then nothing.
	HalfFrame Mode = "half-frame"
	// NeverReads asks for a stream of 2^63-1 elements with unbounded
	// credits (REQUEST_STREAM to the echo responder) and never reads.
	NeverReads Mode = "never-reads"
	// KeepaliveFlood sends KEEPALIVEs with R (respond) and FrameSize bytes
	// of data, which the server must send back, and never reads.
	KeepaliveFlood Mode = "keepalive-flood"
	// RequestFlood sends REQUEST_RESPONSEs with FrameSize bytes of data,
	// which the echo responder sends back, and never reads.
	RequestFlood Mode = "request-flood"
	// FNFFlood sends REQUEST_FNFs with FrameSize bytes of data. The echo
	// responder of `sluice rsocket serve` answers nothing (it counts
	// them); the flood costs the server its handlers and their payloads.
	FNFFlood Mode = "fnf-flood"
	// HugeLength declares a frame of 16 MiB - 1 (the largest length
	// prefix) and sends its first 13 bytes, then nothing.
	HugeLength Mode = "huge-length"
)

// Modes lists every mode, in the order of docs/rsocket.md's table.
var Modes = []Mode{Silent, HalfFrame, NeverReads, KeepaliveFlood, RequestFlood, FNFFlood, HugeLength}

// ParseMode returns the mode named s.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown mode %q (want %s)", s, strings.Join(hostile.Names(Modes), ", "))
}

// Config says what Run does.
type Config struct {
	// URL is the server: tcp://HOST:PORT or ws://HOST:PORT/PATH.
	URL  string
	Mode Mode
	// Conns is how many connections misbehave at once (default 1).
	Conns int
	// FrameSize is the data of each frame the floods and HalfFrame send
	// (default 1 MiB).
	FrameSize int
	// Duration bounds each connection: it is closed by then if the
	// server has not closed it (default 10 s).
	Duration time.Duration
	// MaxFrames bounds the frames a flood sends on one connection
	// (default 100000).
	MaxFrames int
}

// Report is what Run saw.
type Report struct {
	Mode Mode
	// Opened, Failed, Closed (by the server before Duration ended),
	// ClosedAfter and FirstErr: the counts every hostile run keeps.
	hostile.Counts
	Frames int64 // frames written, all connections
	Bytes  int64 // bytes written, all connections
}

func (c *Config) defaults() {
	if c.Conns <= 0 {
		c.Conns = 1
	}
	if c.FrameSize <= 0 {
		c.FrameSize = 1 << 20
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.MaxFrames <= 0 {
		c.MaxFrames = 100000
	}
}

// Run opens cfg.Conns connections to cfg.URL, misbehaves on each by
// cfg.Mode until the server closes it, cfg.Duration passes or ctx ends,
// and reports. Connections are dialled all at once.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg.defaults()
	if _, err := ParseMode(string(cfg.Mode)); err != nil {
		return Report{}, err
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return Report{}, err
	}
	if u.Scheme != "tcp" && u.Scheme != "ws" {
		return Report{}, fmt.Errorf("URL %q: scheme must be tcp or ws", cfg.URL)
	}
	rep := Report{Mode: cfg.Mode}
	var frames, nbytes atomic.Int64
	rep.Counts = hostile.RunConns(ctx, cfg.Conns, cfg.Duration,
		func(ctx context.Context) (*rawConn, error) { return dial(ctx, u) },
		func(ctx context.Context, c *rawConn) bool {
			defer func() { _ = c.nc.Close() }()
			return c.misbehave(ctx, cfg, &frames, &nbytes)
		})
	rep.Frames, rep.Bytes = frames.Load(), nbytes.Load()
	return rep, nil
}

// rawConn is one connection: TCP with length-prefixed frames, or a
// WebSocket (already upgraded) with one frame per binary message.
type rawConn struct {
	nc net.Conn
	br *bufio.Reader // what the upgrade's reader buffered comes first
	ws bool
}

func dial(ctx context.Context, u *url.URL) (*rawConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, err
	}
	c := &rawConn{nc: nc, br: bufio.NewReader(nc), ws: u.Scheme == "ws"}
	if c.ws {
		if dl, ok := ctx.Deadline(); ok {
			_ = nc.SetDeadline(dl)
		}
		if err := c.upgrade(u); err != nil {
			_ = nc.Close()
			return nil, err
		}
		_ = nc.SetDeadline(time.Time{})
	}
	return c, nil
}

// upgrade is a client's WebSocket handshake, by hand.
func (c *rawConn) upgrade(u *url.URL) error {
	var key [16]byte
	_, _ = rand.Read(key[:])
	path := u.RequestURI()
	req := "GET " + path + " HTTP/1.1\r\nHost: " + u.Host +
		"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " +
		base64.StdEncoding.EncodeToString(key[:]) + "\r\n\r\n"
	if _, err := io.WriteString(c.nc, req); err != nil {
		return err
	}
	status, err := c.br.ReadString('\n')
	if err != nil {
		return fmt.Errorf("websocket upgrade: %w", err)
	}
	if !strings.Contains(status, " 101 ") {
		return fmt.Errorf("websocket upgrade: %s", strings.TrimSpace(status))
	}
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			return fmt.Errorf("websocket upgrade: %w", err)
		}
		if line == "\r\n" {
			return nil
		}
	}
}

// header is what precedes a frame of n bytes: its length prefix (TCP) or
// a binary WebSocket message's header, masked with a zero key (RFC 6455
// has clients mask; a zero key leaves the bytes as they are).
func (c *rawConn) header(n int) []byte {
	if !c.ws {
		b, _ := frame.AppendLengthPrefix(nil, n)
		return b
	}
	b := []byte{0x82} // FIN, binary
	switch {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n < 1<<16:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, 0, 0, 0, 0)
}

// framed is f with its header.
func (c *rawConn) framed(f []byte) []byte { return append(c.header(len(f)), f...) }

func setup() []byte {
	f, err := frame.AppendSetup(nil, frame.Setup{
		MajorVersion: frame.ProtocolMajor, MinorVersion: frame.ProtocolMinor,
		KeepaliveInterval: 1<<31 - 1, MaxLifetime: 1<<31 - 1,
		MetadataMIME: []byte("application/octet-stream"), DataMIME: []byte("application/octet-stream"),
	})
	if err != nil {
		panic(err)
	}
	return f
}

// misbehave does cfg.Mode on c until ctx ends or the server closes c,
// and reports the latter.
func (c *rawConn) misbehave(ctx context.Context, cfg Config, frames, nbytes *atomic.Int64) (closed bool) {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.nc.SetWriteDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Now()) })
	defer stop()
	write := func(b []byte) error {
		n, err := c.nc.Write(b)
		nbytes.Add(int64(n))
		return err
	}
	data := make([]byte, cfg.FrameSize)
	var err error
	switch cfg.Mode {
	case Silent:
		return c.awaitClose(ctx)
	case HalfFrame, HugeLength:
		if err = write(c.framed(setup())); err != nil {
			break
		}
		var b []byte
		if cfg.Mode == HugeLength {
			b = c.header(1<<24 - 1)
			b = append(b, make([]byte, 13)...)
		} else {
			f, _ := frame.AppendRequestResponse(nil, 1, 0, nil, data)
			b = c.framed(f)
			b = b[:len(b)-len(f)/2]
		}
		if err = write(b); err != nil {
			break
		}
		return c.awaitClose(ctx)
	default:
		err = c.flood(ctx, cfg, data, write, frames)
	}
	// A write failed: the server closed the connection, unless it was
	// our own deadline (the write's, which may come a moment before
	// ctx's end).
	return err != nil && !isTimeout(err) && ctx.Err() == nil
}

// flood writes the mode's frames until ctx ends, a write fails or
// cfg.MaxFrames were written, and then keeps the connection (hold).
func (c *rawConn) flood(ctx context.Context, cfg Config, data []byte, write func([]byte) error, frames *atomic.Int64) error {
	if err := write(c.framed(setup())); err != nil {
		return err
	}
	var (
		f   []byte
		err error
	)
	switch cfg.Mode {
	case NeverReads:
		f, _ = frame.AppendRequestStream(nil, 1, 0, frame.MaxRequestN, nil, []byte("9223372036854775807"))
		if err := write(c.framed(f)); err != nil {
			return err
		}
		frames.Add(1)
		return c.hold(ctx, write)
	case KeepaliveFlood:
		f, err = frame.AppendKeepalive(nil, true, 0, data)
	}
	if err != nil {
		return err
	}
	for i := range cfg.MaxFrames {
		if ctx.Err() != nil {
			return nil
		}
		id := uint32(2*i + 1)
		switch cfg.Mode {
		case RequestFlood:
			f, err = frame.AppendRequestResponse(f[:0], id, 0, nil, data)
		case FNFFlood:
			f, err = frame.AppendRequestFNF(f[:0], id, 0, nil, data)
		}
		if err != nil {
			return err
		}
		if err := write(c.framed(f)); err != nil {
			return err
		}
		frames.Add(1)
	}
	// The budget spent, the connection stays, still read by nobody:
	// closing it would free at once what the server queued for it.
	return c.hold(ctx, write)
}

// hold keeps the connection until ctx ends, reading nothing
// (hostile.Hold), probing with a KEEPALIVE without R, which the server
// takes and does not answer.
func (c *rawConn) hold(ctx context.Context, write func([]byte) error) error {
	ka, _ := frame.AppendKeepalive(nil, false, 0, nil)
	ka = c.framed(ka)
	return hostile.Hold(ctx, func() error { return write(ka) })
}

// awaitClose reads (and drops) what the server sends until it closes
// the connection (true) or ctx ends (false).
func (c *rawConn) awaitClose(ctx context.Context) bool {
	_, err := io.Copy(io.Discard, c.br)
	return ctx.Err() == nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
