// Package firstmsg bounds, per gRPC connection, the streams of chosen
// methods that are open and have not yet brought their first message.
//
// gRPC starts a handler goroutine for every stream a client opens, up to
// the connection's SETTINGS_MAX_CONCURRENT_STREAMS, before the client has
// sent anything on it. A client opening streams and sending nothing (the
// flood of issue 23: 64 connections × 256 streams to the sink, 100 × 256
// to `xfer serve`) made the daemon run 16,000 to 25,000 goroutines
// waiting for a Hello or a Begin: about 240 MB of stacks at the peak, and,
// after the client went, 13 to 16 MB the Go runtime never gives back (it
// keeps every goroutine record it made, and the span records of their
// stacks). An honest client opens a stream and sends its first message at
// once (an agent's Send carries its Hello, an upload its Begin), so a
// connection with more than a few streams waiting for their first
// message is not one.
//
// Limit refuses such a stream in gRPC's tap (grpc.InTapHandle): before a
// handler goroutine exists, with ResourceExhausted, and gRPC bounds the
// refusals a connection that never reads may have queued (a refusal
// counts as a transport response frame: past 50 queued, gRPC stops
// reading the connection). Its stream interceptor counts the stream out
// when its first message arrives or its handler returns.
package firstmsg

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/sluicehq/sluice/internal/logutil"
)

// DefaultMax is how many streams of the counted methods one connection
// may have waiting for their first message. An agent opens one Send per
// connection; a client uploading files in parallel over one connection
// opens one Upload per file and sends its Begin at once: 16 lets 16
// uploads start together even when their handlers have not run yet.
const DefaultMax = 16

// Config is what a Limit counts and how it reports a refusal.
type Config struct {
	// Max is how many streams of Methods one connection may have waiting
	// for their first message (DefaultMax when ≤ 0).
	Max int
	// Methods are the full method names counted ("/pkg.Service/Method").
	Methods []string
	// Refused, when set, is called for each refused stream (a counter).
	Refused func()
	// Logger, when set, gets Warning at most once a minute, with the
	// peer's address.
	Logger  *slog.Logger
	Warning string
}

// Limit counts, per connection, the open streams of the configured
// methods that have not brought a message yet.
type Limit struct {
	cfg     Config
	methods map[string]bool

	mu sync.Mutex
	// waiting: per connection (local and remote address), its streams
	// waiting for their first message; an entry leaves at zero.
	waiting map[string]int
	warned  logutil.Every
}

// New returns the Limit cfg describes.
func New(cfg Config) *Limit {
	if cfg.Max <= 0 {
		cfg.Max = DefaultMax
	}
	l := &Limit{cfg: cfg, methods: make(map[string]bool, len(cfg.Methods)), waiting: make(map[string]int)}
	for _, m := range cfg.Methods {
		l.methods[m] = true
	}
	return l
}

// ServerOptions are the options that install l on a gRPC server: its
// tap and, first in the chain, its stream interceptor.
func (l *Limit) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.InTapHandle(l.Tap), grpc.ChainStreamInterceptor(l.StreamInterceptor)}
}

type ticketKey struct{}

// ticket is one counted stream; done counts it out (once).
type ticket struct {
	l    *Limit
	conn string
	once sync.Once
}

func (t *ticket) done() {
	t.once.Do(func() {
		t.l.mu.Lock()
		if t.l.waiting[t.conn]--; t.l.waiting[t.conn] <= 0 {
			delete(t.l.waiting, t.conn)
		}
		t.l.mu.Unlock()
	})
}

// Tap is the grpc.InTapHandle: it counts a new stream of a counted
// method in, or refuses it when its connection has the maximum waiting.
func (l *Limit) Tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if !l.methods[info.FullMethodName] {
		return ctx, nil
	}
	conn, remote := connOf(ctx)
	l.mu.Lock()
	if l.waiting[conn] >= l.cfg.Max {
		warn := l.cfg.Logger != nil && l.warned.Due(time.Now(), time.Minute)
		l.mu.Unlock()
		if l.cfg.Refused != nil {
			l.cfg.Refused()
		}
		if warn {
			l.cfg.Logger.Warn(l.cfg.Warning+" (logged once a minute)", "peer", remote,
				"method", info.FullMethodName, "max_waiting", l.cfg.Max)
		}
		return nil, status.Errorf(codes.ResourceExhausted,
			"%d streams of this connection are waiting for their first message, the most one may have", l.cfg.Max)
	}
	l.waiting[conn]++
	l.mu.Unlock()
	return context.WithValue(ctx, ticketKey{}, &ticket{l: l, conn: conn}), nil
}

// StreamInterceptor counts a stream out at its first message, or when
// its handler returns without one.
func (l *Limit) StreamInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	t, _ := ss.Context().Value(ticketKey{}).(*ticket)
	if t == nil {
		return handler(srv, ss)
	}
	defer t.done()
	return handler(srv, &firstRecv{ServerStream: ss, t: t})
}

// firstRecv counts its stream out once a receive returns.
type firstRecv struct {
	grpc.ServerStream
	t *ticket
}

func (f *firstRecv) RecvMsg(m any) error {
	err := f.ServerStream.RecvMsg(m)
	f.t.done()
	return err
}

// connOf names the stream's connection by both its ends, and returns the
// remote one alone too.
func connOf(ctx context.Context) (conn, remote string) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "", ""
	}
	remote = p.Addr.String()
	local := ""
	if p.LocalAddr != nil {
		local = p.LocalAddr.String()
	}
	return local + " " + remote, remote
}
