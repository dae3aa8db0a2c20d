// Package serve runs the server adapters of file transfer (gRPC,
// RSocket, tus, HTTP POST) over one xfer.Backend, each on its own
// listener: what `sluice xfer serve` starts.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/connlimit"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/grpcxfer"
	"github.com/sluicehq/sluice/internal/xfer/post"
	"github.com/sluicehq/sluice/internal/xfer/rsocketxfer"
	"github.com/sluicehq/sluice/internal/xfer/tus"
	"github.com/sluicehq/sluice/rsocket"
)

// Listen says where a server serves each transport ("" for none). RSocket
// takes a URL (tcp://HOST:PORT), the others HOST:PORT. HTTP is the plain
// POST /post/NAME of post.Handler (no resume).
type Listen struct {
	GRPC, RSocket, TUS, HTTP string
	// Log, when set, gets the listeners' warnings (a gRPC connection
	// refused streams: internal/firstmsg).
	Log *slog.Logger
}

// Server serves an xfer.Backend on the transports of a Listen.
type Server struct {
	// Addrs are the bound addresses (an ephemeral port resolved).
	Addrs  Listen
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error
	grpc   *grpc.Server
	http   *http.Server
	post   *http.Server
	// limited are the HTTP listeners' connection limits.
	limited []*connlimit.Listener
}

// Start listens on every transport of l and serves s until Close. tus
// needs an xfer.IDBackend (the local-disk diskstore.Uploads is one).
func Start(s xfer.Backend, l Listen) (*Server, error) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := &Server{cancel: cancel, errs: make(chan error, 4)}
	fail := func(err error) (*Server, error) {
		srv.Close()
		return nil, err
	}
	if l.GRPC != "" {
		ln, err := net.Listen("tcp", l.GRPC)
		if err != nil {
			return fail(fmt.Errorf("--grpc: %w", err))
		}
		srv.Addrs.GRPC = ln.Addr().String()
		srv.grpc = grpc.NewServer(grpcxfer.ServerOptions(s.IdleTimeout(), l.Log)...)
		grpcxfer.Register(srv.grpc, s)
		srv.run(func() error { return srv.grpc.Serve(ln) })
	}
	if l.RSocket != "" {
		ln, path, err := rsocket.Listen(l.RSocket)
		if err != nil {
			return fail(fmt.Errorf("--rsocket: %w", err))
		}
		if path != "" {
			ln.Close()
			return fail(fmt.Errorf("--rsocket: only tcp://HOST:PORT is supported"))
		}
		srv.Addrs.RSocket = "tcp://" + ln.Addr().String()
		r := &rsocketxfer.Responder{Store: s}
		srv.run(func() error {
			return rsocket.Serve(ctx, ln, r, rsocketxfer.ServerOptions()...)
		})
	}
	if l.TUS != "" {
		ids, ok := s.(xfer.IDBackend)
		if !ok {
			return fail(fmt.Errorf("--tus: the backend does not address uploads by id (%T)", s))
		}
		ln, err := net.Listen("tcp", l.TUS)
		if err != nil {
			return fail(fmt.Errorf("--tus: %w", err))
		}
		srv.Addrs.TUS = ln.Addr().String()
		ln = srv.limit(ln)
		mux := http.NewServeMux()
		mux.Handle("/files/", tus.Handler(ids, "/files/"))
		srv.http = &http.Server{Handler: mux, ReadHeaderTimeout: headerTimeout(s), IdleTimeout: idleConnTimeout}
		srv.run(func() error { return srv.http.Serve(ln) })
	}
	if l.HTTP != "" {
		ln, err := net.Listen("tcp", l.HTTP)
		if err != nil {
			return fail(fmt.Errorf("--http: %w", err))
		}
		srv.Addrs.HTTP = ln.Addr().String()
		ln = srv.limit(ln)
		srv.post = &http.Server{Handler: post.Handler(s), ReadHeaderTimeout: headerTimeout(s), IdleTimeout: idleConnTimeout}
		srv.run(func() error { return srv.post.Serve(ln) })
	}
	return srv, nil
}

// limit bounds the connections an HTTP listener serves at once
// (DefaultMaxConns).
func (srv *Server) limit(ln net.Listener) net.Listener {
	l := connlimit.New(ln, DefaultMaxConns)
	srv.limited = append(srv.limited, l)
	return l
}

// idleConnTimeout closes a kept-alive connection that brings no next
// request: each holds one of the listener's DefaultMaxConns slots, and
// without it one that is never closed holds it for good.
const idleConnTimeout = 60 * time.Second

// headerTimeout bounds how long a request's headers may take: 10 s, or
// the store's IdleTimeout if shorter.
func headerTimeout(s xfer.Backend) time.Duration { return min(10*time.Second, s.IdleTimeout()) }

func (srv *Server) run(f func() error) {
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		if err := f(); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, grpc.ErrServerStopped) {
			srv.errs <- err
		}
	}()
}

// Err delivers a transport's failure to serve.
func (srv *Server) Err() <-chan error { return srv.errs }

// Close stops every transport (connections are cut; partial uploads stay).
func (srv *Server) Close() {
	srv.cancel()
	if srv.grpc != nil {
		srv.grpc.Stop()
	}
	if srv.http != nil {
		srv.http.Close()
	}
	if srv.post != nil {
		srv.post.Close()
	}
	srv.wg.Wait()
}
