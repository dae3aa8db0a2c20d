// Package memconn carries protocol frames between two ends in one process,
// through bounded queues: the transport for tests and for the
// deterministic simulation, where a real agent driver talks to a real sink
// session with no network in between.
//
// A Pipe's queues have a fixed capacity, so a reader that stops reading
// eventually blocks the writer, as a full TCP window would. Frames are
// passed by pointer: the receiving side must treat them as read-only, and
// Send copies a Message's payload so that a sender reusing its buffer does
// not change what the peer already received (gRPC marshals, so the real
// transport has the same property).
package memconn

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/sluicehq/sluice/internal/protocol"
)

// DefaultQueue is the frames each direction of a Pipe buffers.
const DefaultQueue = 64

// ErrClosed is returned by Send and Recv on a session that has ended
// without a status.
var ErrClosed = errors.New("memconn: session closed")

type half struct {
	frames chan protocol.Frame
	closed chan struct{} // closed by CloseSend: the reader sees io.EOF after the queue drains
	once   sync.Once
}

// shared is the state both ends see: the session's end and its error.
type shared struct {
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	err    error // the status the session ended with
}

type end struct {
	sh   *shared
	in   *half // frames to us
	out  *half // frames from us
	peer protocol.PeerInfo
	// copyPayloads: see the package comment.
	copyPayloads bool
}

// Pipe returns the two ends of one session: client is what a Dialer's
// caller gets, server is what a Service is given. peer is what the server
// end reports as its peer (credentials, address).
func Pipe(queue int, peer protocol.PeerInfo) (client, server protocol.Conn) {
	if queue <= 0 {
		queue = DefaultQueue
	}
	ctx, cancel := context.WithCancel(context.Background())
	sh := &shared{ctx: ctx, cancel: cancel}
	a := &half{frames: make(chan protocol.Frame, queue), closed: make(chan struct{})}
	b := &half{frames: make(chan protocol.Frame, queue), closed: make(chan struct{})}
	return &end{sh: sh, in: a, out: b, peer: protocol.PeerInfo{Addr: "memconn:server"}, copyPayloads: true},
		&end{sh: sh, in: b, out: a, peer: peer, copyPayloads: true}
}

func (e *end) Send(f protocol.Frame) error {
	select {
	case <-e.out.closed:
		return errors.New("memconn: Send after CloseSend")
	default:
	}
	if e.sh.ctx.Err() != nil {
		return e.endErr() // an ended session takes nothing, even with room in the queue
	}
	if e.copyPayloads {
		f = clone(f)
	}
	if er, ok := f.(*protocol.Error); ok && er.Credits != nil {
		// As gRPC carries it (one ServiceMessage, read back as a Credit
		// and then the Error), so a receiver sees the same frames on
		// both transports.
		c := *er
		c.Credits = nil
		if err := e.put(&protocol.Credit{Credits: er.Credits}); err != nil {
			return err
		}
		f = &c
	}
	return e.put(f)
}

func (e *end) put(f protocol.Frame) error {
	select {
	case e.out.frames <- f:
		return nil
	case <-e.sh.ctx.Done():
		return e.endErr()
	}
}

func (e *end) Recv() (protocol.Frame, error) {
	if e.sh.ctx.Err() != nil {
		return nil, e.endErr() // Close discards what is queued, as a reset connection does
	}
	// Frames already queued are delivered before a CloseSend is noticed,
	// as a TCP stream delivers what was sent before a FIN.
	select {
	case f := <-e.in.frames:
		return f, nil
	default:
	}
	select {
	case f := <-e.in.frames:
		return f, nil
	case <-e.in.closed:
		select {
		case f := <-e.in.frames:
			return f, nil
		default:
			return nil, io.EOF
		}
	case <-e.sh.ctx.Done():
		return nil, e.endErr()
	}
}

func (e *end) CloseSend() error {
	e.out.once.Do(func() { close(e.out.closed) })
	return nil
}

// Close ends the session for both ends; the peer's Send and Recv return
// err (ErrClosed when err is nil).
func (e *end) Close(err error) {
	e.sh.mu.Lock()
	if e.sh.err == nil {
		if err == nil {
			err = ErrClosed
		}
		e.sh.err = err
	}
	e.sh.mu.Unlock()
	e.sh.cancel()
}

func (e *end) endErr() error {
	e.sh.mu.Lock()
	defer e.sh.mu.Unlock()
	if e.sh.err == nil {
		return ErrClosed
	}
	return e.sh.err
}

func (e *end) Context() context.Context { return e.sh.ctx }
func (e *end) Peer() protocol.PeerInfo  { return e.peer }

func clone(f protocol.Frame) protocol.Frame {
	switch f := f.(type) {
	case *protocol.Message:
		c := *f
		c.Payload = append([]byte(nil), f.Payload...)
		return &c
	case *protocol.Dictionary:
		c := *f
		c.Data = append([]byte(nil), f.Data...)
		return &c
	case *protocol.Ack:
		c := *f
		c.Ranges = append([]protocol.IDRange(nil), f.Ranges...)
		return &c
	case *protocol.Stored:
		c := *f
		c.Records = make([][]byte, len(f.Records))
		for i, r := range f.Records {
			c.Records[i] = append([]byte(nil), r...)
		}
		return &c
	}
	return f
}

// Dialer opens sessions to a Service in this process: each session runs
// the service's ServeSend or ServeRead in a goroutine and ends the session
// with its result, as a transport's server would.
type Dialer struct {
	Service protocol.Service
	Peer    protocol.PeerInfo // what the service sees as its peer
	Queue   int               // frames buffered per direction (DefaultQueue if 0)
}

func (d *Dialer) Send(ctx context.Context) (protocol.Conn, error) {
	return d.open(ctx, d.Service.ServeSend)
}

func (d *Dialer) Read(ctx context.Context) (protocol.Conn, error) {
	return d.open(ctx, d.Service.ServeRead)
}

func (d *Dialer) open(ctx context.Context, serve func(protocol.Conn) error) (protocol.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, s := Pipe(d.Queue, d.Peer)
	go func() {
		err := serve(s)
		if err == nil {
			// A handler that returns normally ends the session cleanly:
			// the client reads what was queued and then io.EOF.
			s.CloseSend()
			return
		}
		s.Close(err)
	}()
	// The caller's context ends the session, as it cancels a gRPC stream.
	go func() {
		select {
		case <-ctx.Done():
			c.Close(protocol.Errorf(protocol.StatusCanceled, "%v", ctx.Err()))
		case <-c.Context().Done():
		}
	}()
	return c, nil
}

// PayloadsOwned: Send copies payloads (see the package comment), so a
// received payload is the receiver's.
func (e *end) PayloadsOwned() bool { return e.copyPayloads }
