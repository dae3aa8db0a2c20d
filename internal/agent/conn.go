package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/seglog"
)

// connEvent is what a connection reports to the loop. gen identifies the
// connection, so reports from an older one are ignored.
type connEvent struct {
	gen     uint64
	conn    *conn
	welcome *sluicev1.Welcome  // set once the handshake is done
	resp    *sluicev1.Response // set for every later response
	err     error              // set when the connection ended
	addr    string             // the sink's address
}

// conn is one Send stream. The loop enqueues message ids; the writer
// goroutine reads each from the spool and sends it, so the loop never
// blocks on gRPC flow control or copies message bodies.
type conn struct {
	gen    uint64
	cancel context.CancelFunc
	stream sluicev1.Sink_SendClient

	mu     sync.Mutex
	queue  []uint64
	dict   *codec.Dictionary // to upload before any message
	closed bool
	wake   chan struct{}
}

func (c *conn) enqueue(id uint64) {
	c.mu.Lock()
	c.queue = append(c.queue, id)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// take returns the queued ids (swapping in buf as the new queue) and the
// pending dictionary upload; ok is false once the conn is closed.
func (c *conn) take(buf []uint64) (ids []uint64, dict *codec.Dictionary, ok bool) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, nil, false
		}
		if len(c.queue) > 0 || c.dict != nil {
			ids, c.queue = c.queue, buf[:0]
			dict, c.dict = c.dict, nil
			c.mu.Unlock()
			return ids, dict, true
		}
		c.mu.Unlock()
		<-c.wake
	}
}

// dial opens a stream, performs the handshake and then relays responses to
// the loop until the stream ends.
func (a *Agent) dial(gen uint64, addr string, attempt uint64) {
	cctx, cancelCause := context.WithCancelCause(a.ctx)
	ctx, cancel := cctx, func() { cancelCause(context.Canceled) }
	// A sink that accepts the connection but never answers (stopped,
	// half-open TCP, stuck middlebox) must not hold the agent: without a
	// Welcome in time the attempt fails and the next sink is tried.
	stopDeadline := handshakeDeadline(a.handshakeTimeout(), cancelCause)
	report := func(ev connEvent) {
		select {
		case a.connCh <- ev:
		case <-a.ctx.Done():
		}
	}
	fail := func(err error) {
		if cause := context.Cause(ctx); errors.Is(cause, errHandshakeTimeout) && !errors.Is(err, errHandshakeTimeout) {
			err = fmt.Errorf("%w (%v)", cause, err)
		}
		stopDeadline()
		cancel()
		report(connEvent{gen: gen, err: err, addr: addr})
	}
	// Each connection attempt goes to the next sink in the list.
	stream, err := a.clients[int(attempt%uint64(len(a.clients)))].Send(ctx)
	if err != nil {
		fail(err)
		return
	}
	hello := &sluicev1.Request{Version: ProtocolVersion, Payload: &sluicev1.Request_Hello{Hello: &sluicev1.Hello{
		AgentId:         a.spool.id,
		ProtocolVersion: ProtocolVersion,
		Codecs:          []sluicev1.Codec{sluicev1.Codec_CODEC_PLAIN, sluicev1.Codec_CODEC_ZSTD, sluicev1.Codec_CODEC_ZSTD_DICT},
		Watermark:       a.spool.ackedWatermark(),
	}}}
	if a.cfg.Dictionary != nil {
		hello.GetHello().DictionaryIds = []uint32{a.cfg.Dictionary.ID}
	}
	if err := stream.Send(hello); err != nil {
		// io.EOF from Send means the stream has ended; its real status
		// (PermissionDenied from the sink, say) comes from Recv. Reporting
		// the bare EOF would misclassify a permanent error as transient.
		if errors.Is(err, io.EOF) {
			if _, rerr := stream.Recv(); rerr != nil {
				err = rerr
			}
		}
		fail(fmt.Errorf("send hello: %w", err))
		return
	}
	resp, err := stream.Recv()
	if err != nil {
		fail(fmt.Errorf("handshake: %w", err))
		return
	}
	w := resp.GetWelcome()
	if w == nil {
		fail(errors.New("handshake: the sink's first response is not a Welcome"))
		return
	}
	if w.GetProtocolVersion() != ProtocolVersion {
		fail(fmt.Errorf("handshake: %w: sink speaks protocol %d, agent %d", errVersionMismatch, w.GetProtocolVersion(), ProtocolVersion))
		return
	}
	if !stopDeadline() {
		fail(errHandshakeTimeout) // the Welcome came, but too late: the stream is cancelled
		return
	}
	c := &conn{gen: gen, cancel: cancel, stream: stream, wake: make(chan struct{}, 1)}
	if d := a.cfg.Dictionary; d != nil && a.cfg.Compression == codec.ZstdDict {
		known := false
		for _, id := range w.GetDictionaryIds() {
			known = known || id == d.ID
		}
		if !known {
			c.dict = d
		}
	}
	report(connEvent{gen: gen, conn: c, welcome: w, addr: addr})
	go a.writeLoop(c)
	for {
		resp, err := stream.Recv()
		if err != nil {
			c.close()
			report(connEvent{gen: gen, err: err, addr: addr})
			return
		}
		report(connEvent{gen: gen, resp: resp})
	}
}

// writeLoop sends queued messages, reading each body from the spool.
func (a *Agent) writeLoop(c *conn) {
	it := a.spool.log.NewIterator(0, 1<<20)
	next := ^uint64(0) // the id the iterator would read next
	req := &sluicev1.Request{Version: ProtocolVersion}
	plain, zstd, zdict := &sluicev1.Request_Plain{}, &sluicev1.Request_Zstd{}, &sluicev1.Request_ZstdDict{ZstdDict: &sluicev1.ZstdDict{}}
	var buf []uint64
	for {
		ids, dict, ok := c.take(buf)
		if !ok {
			return
		}
		if dict != nil {
			up := &sluicev1.Request{Version: ProtocolVersion, Payload: &sluicev1.Request_Dictionary{Dictionary: &sluicev1.Dictionary{Id: dict.ID, Data: dict.Data}}}
			if err := c.stream.Send(up); err != nil {
				c.close()
				return
			}
		}
		for _, id := range ids {
			if id != next {
				it.Seek(id)
			}
			if !it.Next() {
				if errors.Is(it.Err(), seglog.ErrTruncated) {
					next = ^uint64(0)
					continue // acknowledged and removed meanwhile
				}
				a.log.Error("cannot read message from spool", "id", id, "err", it.Err())
				c.close()
				return
			}
			next = id + 1
			m, err := decodeSpooled(it.Value())
			if err != nil {
				a.log.Error("corrupt message in spool", "id", id, "err", err)
				c.close()
				return
			}
			req.MessageId, req.RecordCount = id, m.Records
			switch m.Kind {
			case codec.Plain:
				plain.Plain = m.Body
				req.Payload = plain
			case codec.Zstd:
				zstd.Zstd = m.Body
				req.Payload = zstd
			case codec.ZstdDict:
				zdict.ZstdDict.DictionaryId, zdict.ZstdDict.Data = m.DictID, m.Body
				req.Payload = zdict
			}
			// Send marshals req before returning, so the iterator's
			// buffer may be reused afterwards.
			if err := c.stream.Send(req); err != nil {
				c.close()
				return
			}
		}
		buf = ids
	}
}

// sinkAddr is the address connection attempt k goes to.
func (a *Agent) sinkAddr(k uint64) string {
	addrs := strings.Split(a.cfg.SinkAddr, ",")
	return strings.TrimSpace(addrs[int(k%uint64(len(addrs)))])
}
