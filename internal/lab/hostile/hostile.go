// Package hostile is a client that misbehaves on purpose against the
// listeners that are not RSocket: HTTP/1.1 (the agent's ingest, xfer's
// tus and plain POST listeners, every metrics and status listener) and
// HTTP/2 with gRPC (the sink's listener, xfer's gRPC listener). On each
// of many connections it does one thing a careless or hostile peer does:
// says nothing, stops in the middle of its headers, declares a huge body
// or message and sends little, floods requests or streams and never
// reads the answers, or resets the connection in the middle of a body.
//
// It writes raw bytes (HTTP/2 frames with golang.org/x/net/http2's
// Framer), so that it can send what no well-behaved client would. It
// also holds what every hostile-client test shares, the RSocket ones of
// internal/lab/rsockethostile included: RunConns (dial many, count what the
// server closed), HeapPeak and Good (a well-behaved client's loop).
//
// It is the reproduction behind docs/reliability.md's "Hostile clients on
// every listener" table (`sluice hostile`, scripts/hostile-listeners.sh)
// and the tests of hostile_test.go, which run in CI. Every connection is
// bounded in time (Config.Duration) and every flood in requests
// (Config.MaxRequests).
package hostile

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Mode is one misbehaviour.
type Mode string

// The misbehaviours. Each has an HTTP/1.1 and an HTTP/2 form.
const (
	// Silent connects and sends nothing (HTTP/2: not even the preface).
	Silent Mode = "silent"
	// HeadersStall sends a request line and part of its headers
	// (HTTP/2: the preface, SETTINGS and 5 bytes of a frame header),
	// then nothing.
	HeadersStall Mode = "headers-stall"
	// HugeLength declares a huge body (HTTP/1.1: a Content-Length of
	// Target.HugeBody; HTTP/2: a gRPC message of Target.MaxMessage bytes,
	// the most the server takes) and sends 3 bytes of it, then nothing.
	HugeLength Mode = "huge-length"
	// Flood sends requests as fast as the server takes them and never
	// reads: HTTP/1.1 pipelines Target.Flood; HTTP/2 opens streams
	// (HEADERS, no END_STREAM) to Target.GRPCPath, then keeps the
	// connection, and its streams, until the run ends (holdH2).
	Flood Mode = "flood"
	// NeverReads asks for answers and never reads them (HTTP/2: it
	// grants a 2 GiB window and never sends WINDOW_UPDATE nor reads the
	// socket; each stream sends Target.GRPCAsk, a request for a large
	// answer where the service has one), and keeps the connection as
	// Flood does. HTTP/1.1: as Flood with one request.
	NeverReads Mode = "never-reads"
	// Reset sends half of a 1 MiB body (HTTP/2: of a 1 MiB gRPC
	// message), then resets the connection (SO_LINGER 0), and again on a
	// new connection until the duration ends or MaxRequests resets.
	Reset Mode = "reset"
)

// Modes lists every mode, in the order of docs/reliability.md's table.
var Modes = []Mode{Silent, HeadersStall, HugeLength, Flood, NeverReads, Reset}

// ParseMode returns the mode named s.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown mode %q (want %s)", s, strings.Join(Names(Modes), ", "))
}

// Target is a kind of listener: how the modes speak to it.
type Target struct {
	Name string
	H2   bool // HTTP/2 with gRPC, else HTTP/1.1
	// HTTP/1.1: the request line and headers (without the blank line
	// and Content-Length) that HugeLength and Reset send a body with.
	Head string
	// Flood is one complete request that Flood pipelines.
	Flood string
	// HugeBody is the Content-Length HugeLength declares (default 1 TiB;
	// the file servers refuse an upload larger than their free space at
	// once, so theirs is 1 GiB).
	HugeBody int64
	// TusCreate: before the body, POST /files/ with an Upload-Length of
	// 1 GiB and send Head to the Location answered (a tus PATCH).
	TusCreate bool
	// gRPC: the method the modes open streams to, the largest message
	// the server accepts (HugeLength declares it), and the method and
	// messages of NeverReads's streams (GRPCAskPath "": GRPCPath).
	GRPCPath    string
	MaxMessage  int
	GRPCAskPath string
	GRPCAsk     [][]byte
}

// The gRPC messages NeverReads sends, in protobuf by hand (only
// internal/transport/grpctransport speaks the sink's API):
var (
	// sluice.v1.ReadRequest{start: ReadStart{follow: true}}: every
	// message from the start, following.
	readStartFollow = []byte{0x0a, 0x02, 0x18, 0x01}
	// sluice.v1.ReadRequest{request_n: 2^32-1}.
	readCredits = []byte{0x10, 0xff, 0xff, 0xff, 0xff, 0x0f}
	// xfer.v1.OffsetRequest{name: "hostile"}.
	offsetHostile = append([]byte{0x0a, 7}, "hostile"...)
)

// Targets are the listeners of sluice's daemons.
var Targets = []Target{
	{Name: "sink", H2: true, GRPCPath: "/sluice.v1.Sink/Send", MaxMessage: 16 << 20, GRPCAskPath: "/sluice.v1.Sink/Read",
		GRPCAsk: [][]byte{readStartFollow, readCredits}},
	{Name: "ingest", Head: "POST /v1/records HTTP/1.1\r\nHost: hostile\r\nContent-Type: application/x-ndjson\r\n",
		Flood: "GET /v1/records HTTP/1.1\r\nHost: hostile\r\n\r\n"},
	{Name: "xfer-grpc", H2: true, GRPCPath: "/xfer.v1.Xfer/Upload", MaxMessage: 4<<20 + 1<<16,
		GRPCAsk: [][]byte{offsetHostile}},
	{Name: "xfer-tus", TusCreate: true, HugeBody: 1 << 30, Head: "PATCH %s HTTP/1.1\r\nHost: hostile\r\nTus-Resumable: 1.0.0\r\nUpload-Offset: 0\r\nContent-Type: application/offset+octet-stream\r\n",
		Flood: "OPTIONS /files/ HTTP/1.1\r\nHost: hostile\r\nTus-Resumable: 1.0.0\r\n\r\n"},
	{Name: "xfer-http", HugeBody: 1 << 30, Head: "POST /post/hostile-%d HTTP/1.1\r\nHost: hostile\r\n",
		Flood: "GET /post/ HTTP/1.1\r\nHost: hostile\r\n\r\n"},
	{Name: "metrics", Head: "GET /metrics HTTP/1.1\r\nHost: hostile\r\n",
		Flood: "GET /healthz HTTP/1.1\r\nHost: hostile\r\n\r\n"},
}

// ParseTarget returns the target named s.
func ParseTarget(s string) (Target, error) {
	ns := make([]string, len(Targets))
	for i, t := range Targets {
		if t.Name == s {
			return t, nil
		}
		ns[i] = t.Name
	}
	return Target{}, fmt.Errorf("unknown target %q (want %s)", s, strings.Join(ns, ", "))
}

// Config says what Run does.
type Config struct {
	Addr string // HOST:PORT
	// Source is the local IP the connections come from ("": any). The
	// sink caps unidentified connections per address (64): from another
	// loopback address (127.0.0.2) hostile clients do not take the
	// well-behaved client's share.
	Source string
	Target Target
	Mode   Mode
	// Conns is how many connections misbehave at once (default 1).
	Conns int
	// Duration bounds each connection: it is closed by then if the
	// server has not closed it (default 10 s).
	Duration time.Duration
	// MaxRequests bounds what a flood sends on one connection (requests
	// or streams) and the resets of Reset per connection (default 10000).
	MaxRequests int
}

// Report is what Run saw.
type Report struct {
	Mode Mode
	Counts
	Requests int64 // requests, streams or resets, all connections
	Bytes    int64 // bytes written, all connections
}

func (c *Config) defaults() {
	if c.Conns <= 0 {
		c.Conns = 1
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.MaxRequests <= 0 {
		c.MaxRequests = 10000
	}
}

// Run opens cfg.Conns connections to cfg.Addr, misbehaves on each by
// cfg.Mode until the server closes it, cfg.Duration passes or ctx ends,
// and reports. Connections are dialled all at once.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg.defaults()
	if _, err := ParseMode(string(cfg.Mode)); err != nil {
		return Report{}, err
	}
	rep := Report{Mode: cfg.Mode}
	var reqs, nbytes atomic.Int64
	var local net.Addr
	if cfg.Source != "" {
		ip := net.ParseIP(cfg.Source)
		if ip == nil {
			return Report{}, fmt.Errorf("source %q is not an IP address", cfg.Source)
		}
		local = &net.TCPAddr{IP: ip}
	}
	dial := func(ctx context.Context) (*conn, error) {
		d := net.Dialer{LocalAddr: local}
		nc, err := d.DialContext(ctx, "tcp", cfg.Addr)
		if err != nil {
			return nil, err
		}
		return &conn{nc: nc, br: bufio.NewReader(nc), nbytes: &nbytes}, nil
	}
	var seq atomic.Int64
	rep.Counts = RunConns(ctx, cfg.Conns, cfg.Duration, dial, func(ctx context.Context, c *conn) bool {
		c.id = seq.Add(1)
		defer func() { _ = c.nc.Close() }()
		stop := context.AfterFunc(ctx, c.stopNow)
		defer stop()
		if cfg.Mode == Reset {
			return c.resets(ctx, cfg, dial, &reqs)
		}
		var err error
		if cfg.Target.H2 {
			err = c.h2(ctx, cfg, &reqs)
		} else {
			err = c.http1(ctx, cfg, &reqs)
		}
		if err == errAwait {
			return c.awaitClose(ctx)
		}
		// A write failed: the server closed the connection, unless it
		// was our own deadline.
		return err != nil && !isTimeout(err) && ctx.Err() == nil
	})
	rep.Requests, rep.Bytes = reqs.Load(), nbytes.Load()
	return rep, nil
}

var (
	// errAwait: the misbehaviour is sent, wait for the server to close.
	errAwait = errors.New("await close")
)

type conn struct {
	nc     net.Conn
	br     *bufio.Reader
	id     int64
	nbytes *atomic.Int64
	// mu guards nc between the goroutine that replaces it (resets: a new
	// connection each round) and the one that stops it when the run ends
	// (stopNow); the owner's own reads need no lock.
	mu sync.Mutex
}

// stopNow makes the current connection's reads and writes fail at once.
func (c *conn) stopNow() {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.nc.SetDeadline(time.Now())
}

func (c *conn) write(b []byte) error {
	n, err := c.nc.Write(b)
	c.nbytes.Add(int64(n))
	return err
}

// awaitClose reads (and drops) what the server sends until it closes the
// connection (true) or ctx ends (false).
func (c *conn) awaitClose(ctx context.Context) bool {
	_, err := io.Copy(io.Discard, c.br)
	return ctx.Err() == nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// head is the target's request head for a body of n bytes.
func (c *conn) head(cfg Config, n int64) (string, error) {
	h := cfg.Target.Head
	switch {
	case cfg.Target.TusCreate:
		loc, err := c.tusCreate()
		if err != nil {
			return "", err
		}
		h = fmt.Sprintf(h, loc)
	case strings.Contains(h, "%d"):
		h = fmt.Sprintf(h, c.id)
	}
	return h + "Content-Length: " + strconv.FormatInt(n, 10) + "\r\n\r\n", nil
}

// tusCreate creates a tus upload of 1 GiB and returns its path.
func (c *conn) tusCreate() (string, error) {
	req := fmt.Sprintf("POST /files/ HTTP/1.1\r\nHost: hostile\r\nTus-Resumable: 1.0.0\r\nUpload-Length: %d\r\n"+
		"Upload-Metadata: filename %s\r\nContent-Length: 0\r\n\r\n", 1<<30, b64(fmt.Sprintf("hostile-%d-%d", time.Now().UnixNano(), c.id)))
	if err := c.write([]byte(req)); err != nil {
		return "", err
	}
	status, err := c.br.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("tus create: %w", err)
	}
	loc, clen := "", 0
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("tus create: %w", err)
		}
		if line == "\r\n" {
			break
		}
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch strings.ToLower(k) {
		case "location":
			loc = strings.TrimSpace(v)
		case "content-length":
			clen, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	_, _ = c.br.Discard(clen)
	if !strings.Contains(status, " 201 ") || loc == "" {
		return "", fmt.Errorf("tus create: %s", strings.TrimSpace(status))
	}
	if i := strings.Index(loc, "/files/"); i > 0 {
		loc = loc[i:] // an absolute URL: its path
	}
	return loc, nil
}

func b64(s string) string {
	const enc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var out []byte
	b := []byte(s)
	for len(b) > 0 {
		var v [3]byte
		n := copy(v[:], b)
		b = b[n:]
		x := uint(v[0])<<16 | uint(v[1])<<8 | uint(v[2])
		q := []byte{enc[x>>18&63], enc[x>>12&63], enc[x>>6&63], enc[x&63]}
		for i := n + 1; i < 4; i++ {
			q[i] = '='
		}
		out = append(out, q...)
	}
	return string(out)
}

// http1 sends cfg.Mode's misbehaviour over HTTP/1.1.
func (c *conn) http1(ctx context.Context, cfg Config, reqs *atomic.Int64) error {
	switch cfg.Mode {
	case Silent:
		return errAwait
	case HeadersStall:
		h, err := c.head(cfg, 1)
		if err != nil {
			return err
		}
		if err := c.write([]byte(h[:len(h)/2])); err != nil {
			return err
		}
		return errAwait
	case HugeLength:
		h, err := c.head(cfg, cmp.Or(cfg.Target.HugeBody, 1<<40))
		if err != nil {
			return err
		}
		if err := c.write(append([]byte(h), "abc"...)); err != nil {
			return err
		}
		reqs.Add(1)
		return errAwait
	}
	// Flood and NeverReads: pipelined requests, never a byte read.
	n := cfg.MaxRequests
	if cfg.Mode == NeverReads {
		n = 1
	}
	req := []byte(cfg.Target.Flood)
	var batch []byte
	for i := 0; i < n; {
		if ctx.Err() != nil {
			return nil
		}
		batch = batch[:0]
		for ; i < n && len(batch) < 32<<10; i++ {
			batch = append(batch, req...)
		}
		if err := c.write(batch); err != nil {
			return err
		}
		reqs.Add(int64(len(batch) / len(req)))
	}
	// Flood and NeverReads alike keep the connection, unread (Hold),
	// probing with a byte of a next request each time, all but its last
	// (which would complete it), then with nothing.
	sent := 0
	return Hold(ctx, func() error {
		if sent == len(req)-1 {
			return nil
		}
		sent++
		return c.write(req[sent-1 : sent])
	})
}

// resets does Reset: half a body, then RST, on one new connection after
// another. It reports whether the server closed one first.
func (c *conn) resets(ctx context.Context, cfg Config, dial func(context.Context) (*conn, error), reqs *atomic.Int64) bool {
	const size = 1 << 20
	half := zeros[:size/2]
	for i := 0; i < cfg.MaxRequests && ctx.Err() == nil; i++ {
		if i > 0 {
			nc, err := dial(ctx)
			if err != nil {
				return false
			}
			c.mu.Lock()
			c.nc, c.br = nc.nc, nc.br
			c.mu.Unlock()
			if ctx.Err() != nil {
				c.stopNow() // the run ended while dialing: stopNow saw the old one
			}
		}
		var b []byte
		if cfg.Target.H2 {
			b = append(b, h2Open(cfg.Target.GRPCPath, 1, false)...)
			b = append(b, h2Data(1, grpcPrefix(size), half)...)
		} else {
			h, err := c.head(cfg, size)
			if err != nil {
				_ = c.nc.Close()
				return false
			}
			b = []byte(h)
		}
		err := c.write(b)
		if err == nil && !cfg.Target.H2 {
			err = c.write(half)
		}
		if tc, ok := c.nc.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.nc.Close()
		if err != nil && !isTimeout(err) && ctx.Err() == nil {
			return true
		}
		reqs.Add(1)
	}
	return false
}

// zeros are the bodies Reset sends (never written to).
var zeros = make([]byte, 1<<19)

// HTTP/2

func grpcPrefix(n int) []byte {
	b := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(n))
	return b
}

// h2Preface is the client preface and a SETTINGS frame granting window
// (0: the default).
func h2Preface(window uint32) []byte {
	var buf bytes.Buffer
	buf.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&buf, nil)
	var s []http2.Setting
	if window > 0 {
		s = append(s, http2.Setting{ID: http2.SettingInitialWindowSize, Val: window})
	}
	_ = fr.WriteSettings(s...)
	if window > 0 {
		_ = fr.WriteWindowUpdate(0, window-65535)
	}
	return buf.Bytes()
}

// h2Open is the HEADERS frame of a gRPC call to path on stream id.
func h2Open(path string, id uint32, end bool) []byte {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path},
		{":authority", "hostile"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	var buf bytes.Buffer
	_ = http2.NewFramer(&buf, nil).WriteHeaders(http2.HeadersFrameParam{StreamID: id,
		BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: end})
	return buf.Bytes()
}

// h2Data is a DATA frame on stream id carrying prefix and data (at most
// 16 KiB per frame: it splits).
func h2Data(id uint32, prefix, data []byte) []byte {
	all := append(append([]byte(nil), prefix...), data...)
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	for len(all) > 0 {
		n := min(len(all), 16<<10)
		_ = fr.WriteData(id, false, all[:n])
		all = all[n:]
	}
	return buf.Bytes()
}

// h2 sends cfg.Mode's misbehaviour over HTTP/2.
func (c *conn) h2(ctx context.Context, cfg Config, reqs *atomic.Int64) error {
	t := cfg.Target
	switch cfg.Mode {
	case Silent:
		return errAwait
	case HeadersStall:
		b := h2Preface(0)
		b = append(b, h2Open(t.GRPCPath, 1, false)[:5]...)
		if err := c.write(b); err != nil {
			return err
		}
		return errAwait
	case HugeLength:
		b := h2Preface(0)
		b = append(b, h2Open(t.GRPCPath, 1, false)...)
		b = append(b, h2Data(1, grpcPrefix(t.MaxMessage), []byte("abc"))...)
		if err := c.write(b); err != nil {
			return err
		}
		reqs.Add(1)
		return errAwait
	}
	window := uint32(0)
	if cfg.Mode == NeverReads {
		window = 1<<31 - 1
	}
	if err := c.write(h2Preface(window)); err != nil {
		return err
	}
	// Streams as fast as the server takes them, never a byte read.
	var batch []byte
	id := uint32(1)
	for i := 0; i < cfg.MaxRequests; {
		if ctx.Err() != nil {
			return nil
		}
		batch = batch[:0]
		n := 0
		for ; i < cfg.MaxRequests && len(batch) < 32<<10; i++ {
			if cfg.Mode == NeverReads {
				batch = append(batch, h2Open(cmp.Or(t.GRPCAskPath, t.GRPCPath), id, false)...)
				for _, m := range t.GRPCAsk {
					batch = append(batch, h2Data(id, grpcPrefix(len(m)), m)...)
				}
			} else {
				batch = append(batch, h2Open(t.GRPCPath, id, false)...)
			}
			id += 2
			n++
		}
		if err := c.write(batch); err != nil {
			return err
		}
		reqs.Add(int64(n))
	}
	return c.holdH2(ctx)
}

// holdH2 keeps a flood's or never-reads' connection, and the streams it
// opened, until ctx ends, reading nothing (Hold), probing with a PRIORITY
// frame, which asks for no answer (RFC 9113 §6.3: a server ignores it).
// Before, the connection was closed as soon as its streams were sent, so
// the server saw a burst of streams and an EOF, and the streams were
// freed at once, not held by a client that never reads.
func (c *conn) holdH2(ctx context.Context) error {
	var buf bytes.Buffer
	_ = http2.NewFramer(&buf, nil).WritePriority(1, http2.PriorityParam{Weight: 15})
	return Hold(ctx, func() error { return c.write(buf.Bytes()) })
}
