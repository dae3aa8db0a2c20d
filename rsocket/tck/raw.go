package tck

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// raw is one connection to the server under test that sends and receives
// whole frames as bytes, so a check can send what a well-behaved client
// never would. A reader goroutine queues every frame it receives, except
// that it answers the server's KEEPALIVE with R itself (servers such as
// rsocket-java send them and close connections that do not answer).
type raw struct {
	write func([]byte) error
	close func()
	in    chan []byte
	done  chan struct{} // the reader ended: err says why
	err   error
	wmu   sync.Mutex
	obs   *observer
}

var (
	errTimeout = errors.New("timed out")
	errClosed  = errors.New("connection closed")
)

// dial connects to cfg.URL: tcp://, tls://, ws:// or wss://.
func dial(ctx context.Context, cfg *Config, obs *observer) (*raw, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("bad URL %q: %w", cfg.URL, err)
	}
	r := &raw{in: make(chan []byte, 1024), done: make(chan struct{}), obs: obs}
	var read func() ([]byte, error)
	switch u.Scheme {
	case "tcp", "tls":
		var nc net.Conn
		if u.Scheme == "tls" {
			d := tls.Dialer{Config: cfg.TLS}
			nc, err = d.DialContext(ctx, "tcp", u.Host)
		} else {
			var d net.Dialer
			nc, err = d.DialContext(ctx, "tcp", u.Host)
		}
		if err != nil {
			return nil, err
		}
		br := bufio.NewReaderSize(nc, 64<<10)
		read = func() ([]byte, error) { return frame.ReadLengthPrefixed(br, nil, frame.MaxFrameSize) }
		r.write = func(f []byte) error {
			b, err := frame.AppendLengthPrefix(make([]byte, 0, len(f)+3), len(f))
			if err != nil {
				return err
			}
			_, err = nc.Write(append(b, f...))
			return err
		}
		r.close = func() { _ = nc.Close() }
	case "ws", "wss":
		var opts *websocket.DialOptions
		if u.Scheme == "wss" && cfg.TLS != nil {
			opts = &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: cfg.TLS.Clone()}}}
		}
		wc, _, err := websocket.Dial(ctx, cfg.URL, opts)
		if err != nil {
			return nil, err
		}
		wc.SetReadLimit(frame.MaxFrameSize + 1)
		read = func() ([]byte, error) {
			for {
				typ, b, err := wc.Read(context.Background())
				if err != nil || typ == websocket.MessageBinary {
					return b, err
				}
			}
		}
		r.write = func(f []byte) error {
			wctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
			defer cancel()
			return wc.Write(wctx, websocket.MessageBinary, f)
		}
		r.close = func() { _ = wc.CloseNow() }
	default:
		return nil, fmt.Errorf("URL %q: scheme must be tcp, tls, ws or wss", cfg.URL)
	}
	go r.readLoop(read)
	return r, nil
}

func (r *raw) readLoop(read func() ([]byte, error)) {
	defer close(r.done)
	for {
		f, err := read()
		if err != nil {
			r.err = err
			return
		}
		r.obs.saw(f)
		if h, err := frame.ParseHeader(f); err == nil && h.Type == frame.TypeKeepalive && h.Has(frame.FlagRespond) {
			if k, err := frame.ParseKeepalive(f); err == nil {
				if b, err := frame.AppendKeepalive(nil, false, 0, k.Data); err == nil {
					_ = r.send(b)
				}
			}
			continue
		}
		select {
		case r.in <- f:
		default:
			r.err = errors.New("the server sent more than 1024 frames the check did not read")
			r.close()
			return
		}
	}
}

// send writes frames, in order.
func (r *raw) send(fs ...[]byte) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	for _, f := range fs {
		if err := r.write(f); err != nil {
			return err
		}
	}
	return nil
}

// next returns the next frame, errTimeout after d, or errClosed (wrapping
// the reader's error) when the server closed the connection.
func (r *raw) next(d time.Duration) ([]byte, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case f := <-r.in:
		return f, nil
	case <-t.C:
		return nil, errTimeout
	case <-r.done:
		select {
		case f := <-r.in:
			return f, nil
		default:
			return nil, fmt.Errorf("%w: %v", errClosed, r.err)
		}
	}
}
