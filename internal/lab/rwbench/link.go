package rwbench

import (
	"net"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/lab/netem"
)

// outageLink is a netem link that can be taken down and brought back on
// the same address: down refuses new connections and resets the live
// ones, as a cut WAN link does to the applications on both ends (a real
// cut may rather black-hole packets until TCP times out; both sides here
// retry either way).
type outageLink struct {
	l    *netem.Link
	addr string

	mu  sync.Mutex
	lis net.Listener // nil while down
}

func newOutageLink(target string, rate int64, rtt time.Duration) (*outageLink, error) {
	l, err := netem.New(netem.Config{Target: target, Rate: rate, Delay: rtt / 2})
	if err != nil {
		return nil, err
	}
	o := &outageLink{l: l}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		l.Close()
		return nil, err
	}
	o.addr = lis.Addr().String()
	o.serve(lis)
	return o, nil
}

func (o *outageLink) serve(lis net.Listener) {
	o.mu.Lock()
	o.lis = lis
	o.mu.Unlock()
	go o.l.Serve(lis)
}

// down cuts the link.
func (o *outageLink) down() {
	o.mu.Lock()
	if o.lis != nil {
		o.lis.Close()
		o.lis = nil
	}
	o.mu.Unlock()
	o.l.ResetAll()
}

// up restores the link on its address.
func (o *outageLink) up() error {
	lis, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	o.serve(lis)
	return nil
}

// bytes is what crossed the link both ways so far: payload, requests'
// headers and the answers.
func (o *outageLink) bytes() int64 {
	st := o.l.Stats()
	return st.BytesUp + st.BytesDown
}

func (o *outageLink) close() { o.down(); o.l.Close() }
