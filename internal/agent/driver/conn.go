package driver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/seglog"
)

// connEvent is what a connection reports to the loop. gen identifies the
// connection, so reports from an older one are ignored.
type connEvent struct {
	gen     uint64
	conn    *conn
	welcome *protocol.Welcome // set once the handshake is done
	frame   protocol.Frame    // set for every later frame from the sink
	err     error             // set when the connection ended
	addr    string            // the sink's address
	refused *localRefusal     // set when the writer could not send a message
}

// localRefusal is a message the session writer could not make a frame of
// for this session. Closing the session over it would only bring the same
// message first into the next session's window, and close that one too,
// with nothing else ever delivered; so the loop parks it as a sink's
// refusal for good is parked: the session goes on without it, and the next
// session (maybe a sink that takes it, maybe a repaired spool) tries again.
type localRefusal struct {
	id     uint64
	code   string // the Rejected metric's label: local_*, apart from the wire's ERROR_CODE_*
	reason string
	err    error
}

// Codes of local refusals (the Rejected metric's label).
const (
	refusedUnreadable    = "local_unreadable"    // the spool could not read the record back
	refusedCorrupt       = "local_corrupt"       // the record read back is no spooled message
	refusedUnconvertible = "local_unconvertible" // a Kafka records message that does not turn into zstd
)

// errNotInSpool: the iterator ended before a message the Sender holds.
var errNotInSpool = errors.New("the spool ends before this message")

// conn is one Send session. The loop enqueues message ids; the writer
// goroutine reads each from the spool and sends it, so the loop never
// blocks on the transport's flow control or copies message bodies.
type conn struct {
	gen    uint64
	cancel context.CancelFunc
	pc     protocol.Conn
	// kafka: the sink asked for messages sealed as Kafka records
	// (Welcome.Codec); without it a KafkaZstd message is sent as zstd.
	kafka bool

	mu     sync.Mutex
	queue  []queued
	dict   *codec.Dictionary // to upload before any message
	closed bool
	wake   chan struct{}
}

// queued is a message to send: its id, and its spool record when it was
// just spooled (see spool.Spooled.Rec); nil means read it from the spool.
type queued struct {
	id  uint64
	rec *[]byte
}

func (c *conn) enqueue(id uint64, rec *[]byte) {
	c.mu.Lock()
	c.queue = append(c.queue, queued{id, rec})
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
	c.pc.Close(nil)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// take returns the queued ids (swapping in buf as the new queue) and the
// pending dictionary upload; ok is false once the conn is closed.
func (c *conn) take(buf []queued) (ids []queued, dict *codec.Dictionary, ok bool) {
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

// codecs are what this agent can send, in the Hello. CodecKafkaZstd is
// listed whatever the agent's compression: its spool may hold messages
// sealed so in an earlier session, and it tells the sink it may ask for
// it (Welcome.Codec; an agent whose compression is not zstd keeps its own).
var codecs = []protocol.Codec{protocol.CodecPlain, protocol.CodecZstd, protocol.CodecZstdDict, protocol.CodecKafkaZstd}

// olderSink reports whether err is a sink's refusal of a Hello carrying
// SentBelow from a decoder that predates it: RSocket's Hello ended at the
// watermark, and such a sink refuses the bytes after it as malformed
// (protobuf, over gRPC, skips a field it does not know).
func olderSink(err error) bool {
	return protocol.StatusOf(err) == protocol.StatusInvalid && strings.Contains(err.Error(), "Hello: bytes after the fields")
}

// dial opens a session, performs the handshake and then relays the sink's
// frames to the loop until the session ends.
func (d *Driver) dial(gen uint64, attempt uint64) {
	i := int(attempt % uint64(len(d.cfg.Dialers)))
	addr := d.cfg.Addrs[i]
	cctx, cancelCause := context.WithCancelCause(d.ctx)
	ctx, cancel := cctx, func() { cancelCause(context.Canceled) }
	// A sink that accepts the connection but never answers (stopped,
	// half-open TCP, stuck middlebox) must not hold the agent: without a
	// Welcome in time the attempt fails and the next sink is tried.
	stopDeadline := handshakeDeadline(d.cfg.HandshakeTimeout, cancelCause)
	report := d.report
	fail := func(pc protocol.Conn, err error) {
		if cause := context.Cause(ctx); errors.Is(cause, errHandshakeTimeout) && !errors.Is(err, errHandshakeTimeout) {
			err = fmt.Errorf("%w (%v)", cause, err)
		}
		stopDeadline()
		cancel()
		if pc != nil {
			pc.Close(nil)
		}
		report(connEvent{gen: gen, err: err, addr: addr})
	}
	// Each connection attempt goes to the next sink in the list.
	pc, err := d.cfg.Dialers[i].Send(ctx)
	if err != nil {
		fail(nil, err)
		return
	}
	// SentBelow lets the sink refuse this session when it holds ids under
	// this agent id that this spool never sent: another spool numbered
	// them, and our messages with those ids would be taken for its.
	// The bound is at least the watermark: the sink counts every id below
	// the watermark as held (store.Dedup.Settle), and ids the spool skipped
	// after a power cut are below it without ever having been sent.
	sentBelow, known := d.spool.SentBelow()
	watermark := d.spool.AckedWatermark()
	_, older := d.olderSinks.Load(addr)
	hello := &protocol.Hello{AgentID: d.spool.ID(), Version: protocol.Version, Codecs: codecs, Watermark: watermark,
		SentBelow: max(sentBelow, watermark), HasSentBelow: known && !older}
	if d.cfg.Dictionary != nil {
		hello.DictionaryIDs = []uint32{d.cfg.Dictionary.ID}
	}
	// A Send that fails because the session ended reports the session's
	// status (PermissionDenied from the sink, say), not a bare EOF: the
	// transports look it up (see protocol.Conn).
	if err := pc.Send(hello); err != nil {
		fail(pc, fmt.Errorf("send hello: %w", err))
		return
	}
	f, err := pc.Recv()
	if err != nil {
		if hello.HasSentBelow && olderSink(err) {
			d.olderSinks.Store(addr, true)
			d.log.Warn("agent: the sink refuses the bound on sent ids in the Hello (a sink older than it, over RSocket); "+
				"its sessions go without it, so it cannot refuse another spool's ids under this agent id", "sink", addr)
		}
		fail(pc, fmt.Errorf("handshake: %w", err))
		return
	}
	w, ok := f.(*protocol.Welcome)
	if !ok {
		fail(pc, fmt.Errorf("handshake: the sink's first frame is a %s, not a Welcome", protocol.Name(f)))
		return
	}
	if w.Version != protocol.Version {
		fail(pc, fmt.Errorf("handshake: %w: sink speaks protocol %d, agent %d", errVersionMismatch, w.Version, protocol.Version))
		return
	}
	if !stopDeadline() {
		fail(pc, errHandshakeTimeout) // the Welcome came, but too late: the session is cancelled
		return
	}
	c := &conn{gen: gen, cancel: cancel, pc: pc, wake: make(chan struct{}, 1), kafka: w.Codec == protocol.CodecKafkaZstd}
	if dict := d.cfg.Dictionary; dict != nil && d.cfg.Compression == codec.ZstdDict {
		known := false
		for _, id := range w.DictionaryIDs {
			known = known || id == dict.ID
		}
		if !known {
			c.dict = dict
		}
	}
	report(connEvent{gen: gen, conn: c, welcome: w, addr: addr})
	go d.writeLoop(c)
	for {
		f, err := pc.Recv()
		if err != nil {
			c.close()
			report(connEvent{gen: gen, err: err, addr: addr})
			return
		}
		// A frame's slices may alias a buffer the next Recv reuses (see
		// protocol.Conn): the loop copies what it keeps (ack ranges).
		report(connEvent{gen: gen, frame: f})
	}
}

// report hands ev to the loop, unless the driver is stopping.
func (d *Driver) report(ev connEvent) {
	select {
	case d.connCh <- ev:
	case <-d.ctx.Done():
	}
}

// refuse hands the loop message id, which this session cannot send (see
// localRefusal); the writer goes on with the next one.
func (d *Driver) refuse(c *conn, id uint64, code, reason string, err error) {
	d.report(connEvent{gen: c.gen, refused: &localRefusal{id: id, code: code, reason: reason, err: err}})
}

// writeLoop sends queued messages, reading each body from the spool. The
// payload sent is the spool record's body as read: no decoding or
// re-encoding on the agent (the transport copies it once, marshalling).
func (d *Driver) writeLoop(c *conn) {
	it := d.spool.Log().NewIterator(0, 1<<20)
	next := ^uint64(0) // the id the iterator would read next
	var msg protocol.Message
	var buf []queued
	var unseal unsealer
	for {
		ids, dict, ok := c.take(buf)
		if !ok {
			return
		}
		if dict != nil {
			if err := c.pc.Send(&protocol.Dictionary{ID: dict.ID, Data: dict.Data}); err != nil {
				c.close()
				return
			}
		}
		for i, q := range ids {
			id := q.id
			// The bound on sent ids covers id before it goes out: sent
			// past a bound that is not on disk, a restart's Hello would
			// tell the sink this spool never sent an id it holds, and
			// the sink would refuse it (spool.ReserveSent).
			if err := d.spool.ReserveSent(id); err != nil {
				d.log.Error("agent: cannot persist the bound on sent message ids; reconnecting", "err", err)
				c.close()
				return
			}
			var rec []byte
			if q.rec != nil {
				rec = *q.rec // fresh: sent from memory, not read back
			} else {
				if id != next {
					it.Seek(id)
				}
				if !it.Next() {
					err := it.Err()
					next = ^uint64(0) // the iterator keeps its error until it seeks
					switch {
					case errors.Is(err, seglog.ErrTruncated):
						continue // acknowledged and removed meanwhile
					case errors.Is(err, seglog.ErrClosed):
						c.close() // the agent is stopping
						return
					case err == nil:
						err = errNotInSpool
					default:
						// The start-up check read this record whole: the
						// disk failed or changed it under the agent. A
						// restart meets that check again, which names
						// the damage (the spool reports it: Healthy).
						d.spool.ReadFailed(fmt.Errorf("message %d: %w", id, err))
					}
					d.refuse(c, id, refusedUnreadable, "cannot read message from spool", err)
					continue
				}
				next = id + 1
				rec = it.Value()
			}
			m, err := spool.Decode(rec)
			if err != nil {
				spool.PutBuf(q.rec)
				ids[i].rec = nil
				d.refuse(c, id, refusedCorrupt, "corrupt message in spool", err)
				continue
			}
			msg = protocol.Message{ID: id, Records: m.Records, Codec: wireCodec(m.Kind), DictID: m.DictID, Payload: m.Body}
			if m.Kind == codec.KafkaZstd && !c.kafka {
				body, err := unseal.toZstd(m.Body, d.spool.ID(), id, m.Records)
				if err != nil {
					// Sent as it is, a sink that does not know the codec
					// would refuse it for good; parked, it waits for a
					// session whose sink asks for Kafka records.
					spool.PutBuf(q.rec)
					ids[i].rec = nil
					d.refuse(c, id, refusedUnconvertible, "cannot turn a message sealed as Kafka records into zstd for this sink", err)
					continue
				}
				msg.Codec, msg.Payload = protocol.CodecZstd, body
				spool.PutBuf(q.rec)
				ids[i].rec, q.rec = nil, nil
			}
			if os, ok := c.pc.(ownedSender); ok && q.rec != nil {
				// The transport frees the fresh record once it has
				// written it, so it is not copied to be framed.
				err = os.SendOwned(&msg, q.rec, spool.PutBuf)
			} else {
				// Send is done with msg when it returns (see
				// protocol.Conn), so the iterator's buffer or the fresh
				// record may be reused afterwards.
				err = c.pc.Send(&msg)
				spool.PutBuf(q.rec)
			}
			ids[i].rec = nil
			if err != nil {
				c.close()
				return
			}
		}
		buf = ids
	}
}

// ownedSender is a transport that can send a message whose payload aliases
// rec without copying it, calling put(rec) when it no longer reads it
// (transport/grpctransport: the payload goes to gRPC's writer as its own buffer).
type ownedSender interface {
	SendOwned(m *protocol.Message, rec *[]byte, put func(*[]byte)) error
}

// wireCodec is the protocol's name for a spooled message's codec.
func wireCodec(k codec.Kind) protocol.Codec {
	switch k {
	case codec.Plain:
		return protocol.CodecPlain
	case codec.Zstd:
		return protocol.CodecZstd
	case codec.ZstdDict:
		return protocol.CodecZstdDict
	case codec.KafkaZstd:
		return protocol.CodecKafkaZstd
	}
	return protocol.CodecUnspecified
}
