package rsockettransport

import (
	"context"
	"net"

	"github.com/sluicehq/sluice/internal/protocol"
)

// Start serves svc at rawURL as ServeURL does, in the background, for a
// daemon that serves gRPC beside it: it returns the address once
// listening (or the error that kept it from listening), and a later
// failure of the listener goes to failed if failed has room, as the
// return of the daemon's gRPC Serve does. ctx's end stops the serving.
func Start(ctx context.Context, rawURL string, svc protocol.Service, failed chan<- error, opts ...Option) (net.Addr, error) {
	ready := make(chan net.Addr, 1)
	errc := make(chan error, 1)
	go func() {
		err := ServeURL(ctx, rawURL, svc, func(a net.Addr) { ready <- a }, opts...)
		errc <- err
		if err != nil {
			select {
			case failed <- err:
			default:
			}
		}
	}()
	select {
	case a := <-ready:
		return a, nil
	case err := <-errc:
		return nil, err
	}
}
