package sink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/delivery"
	"github.com/sluicehq/sluice/internal/logutil"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/store"
)

// session drives one agent's Send session over a protocol.Conn. Three
// goroutines share it:
//
//   - the receiver (recvLoop, validate.go) reads frames, validates batches
//     and dictionary uploads and steps the delivery.Receiver with them
//     itself, handing enqueued messages straight to the storage writer
//     (flow.go): a message crosses no goroutine between the transport and
//     the writer;
//   - the loop (the ServeSend goroutine) steps everything else: Stored
//     events from the writer, store status, the Kafka gate, held messages
//     the writer had no room for, shutdown; it decides when the session
//     ends;
//   - the sender (sendLoop) is the only goroutine calling conn.Send.
//
// mu serialises the receiver's and the loop's steps: the Receiver, the
// flow state and the pending frames are only touched under it. The
// storage writer reports stored ids through the session's store.Acks,
// which never blocks, so a slow agent cannot hold up the writer; the
// writer knows nothing else of the session.
type session struct {
	// rejectLog, rejectQuiet: the "message rejected" line is logged at
	// most once a minute per session, with how many it left out (an agent
	// re-offers every message refused for good at each session).
	rejectLog   logutil.Every
	rejectQuiet int
	s           *Sink
	conn        protocol.Conn
	agent       string
	hello       protocol.Hello // its agent id and bound on sent ids, for checkSentBelow once a gate opens
	agentB      []byte
	session     string
	// vouched names the credentials that proved the agent id (checkSend).
	vouched string
	log     *slog.Logger
	rcv     *delivery.Receiver
	acks    *store.Acks
	// ownPayloads: conn hands over what Recv returns (see
	// protocol.PayloadOwner), so a payload is kept without a copy.
	ownPayloads bool
	// storeTakesKafka: the store takes codec.KafkaZstd bodies as they
	// are (store.TakesKafkaRecords); otherwise the receiver converts
	// them (kafkaConv) into zstd batches before the writer sees them.
	storeTakesKafka bool
	// kafkaConv is the receiver's, created at the first KafkaZstd
	// message that needs converting.
	kafkaConv *kafkaConverter

	// mu guards rcv, flow, pending and creditsDirty (see session).
	mu sync.Mutex
	// ended (capacity 1) carries why the receiver stopped: io.EOF when
	// the agent closed its side, or the error that ends the session.
	ended chan error
	// kick (capacity 1) wakes the loop when the receiver held a message
	// the writer had no room for.
	kick chan struct{}
	// refuse: the receiver takes nothing more (the sink is shutting
	// down, or the session ended).
	refuse bool

	out      chan protocol.Frame
	sendDone chan struct{} // closed when sendLoop returns
	sendErr  error         // why sendLoop stopped early; read after sendDone
	done     chan struct{} // closed when the loop returns

	// pending are the frames of the current step, sent by flush.
	pending      []protocol.Frame
	creditsDirty bool

	flow

	// statusCh (capacity 1) holds the latest store status to tell the
	// agent.
	statusCh chan *protocol.StoreStatus
}

// inKind says what the receiver found in a frame.
type inKind uint8

const (
	inMessage    inKind = iota // a valid batch, in msg
	inInvalid                  // a batch that failed validation, in rej
	inDictionary               // dictionary dictID was uploaded and stored
	inHello                    // a second Hello
	inFatal                    // a protocol violation: end the session with err
)

type inbound struct {
	kind    inKind
	id      uint64 // message id
	size    int64  // payload bytes as sent
	msg     store.Message
	rej     rejection
	dictID  uint32
	version uint32
	err     error
}

// rejection is why a batch was refused, for the agent, the log and the
// metrics.
type rejection struct {
	code      protocol.ErrorCode
	reason    string // metric label
	detail    string
	retryable bool
}

// ServeSend serves one agent's Send session (protocol.Service): the
// handshake, then messages until the agent closes its side, the sink shuts
// down or something fails. See docs/architecture.md, "Send streams".
func (s *Sink) ServeSend(c protocol.Conn) error {
	leave, err := s.enter(c)
	if err != nil {
		return err
	}
	defer leave()
	ctx := c.Context()
	peer := c.Peer()
	f, err := recvFirst(s, c, "Hello")
	if err == io.EOF {
		return protocol.Errorf(protocol.StatusInvalid, "stream closed before its Hello")
	}
	if err != nil {
		return err
	}
	hello, ok := f.(*protocol.Hello)
	if !ok {
		if m, ok := f.(*protocol.Malformed); ok && m.Version != protocol.Version {
			return protocol.Errorf(protocol.StatusInvalid, "%s", m.Detail)
		}
		s.log.Warn("sink: Send stream without Hello", "peer", peer.Addr, "first", frameName(f))
		return protocol.Errorf(protocol.StatusInvalid, "the first Request of a Send stream must carry a Hello, not %s", frameName(f))
	}
	agent := hello.AgentID
	if agent == "" || len(agent) > maxAgentID {
		return protocol.Errorf(protocol.StatusInvalid, "Hello.agent_id of %d bytes: want 1 to %d", len(agent), maxAgentID)
	}
	vouched, err := s.checkSend(ctx, peer, agent)
	if err != nil {
		return err
	}
	// The connection has proven an identity: it no longer counts against
	// MaxConnsPerPeer while this session lasts (limits.go).
	defer s.peers.identified(peer)()
	// The agent sends no id below its watermark again: those ids count
	// as stored from now on, so the gaps below it (messages set aside,
	// ids skipped after an unclean stop) stop costing the index a run
	// each (store.Dedup.Settle).
	if s.dedup != nil {
		s.dedup.Lock()
		err := s.checkSentBelow(hello)
		if err == nil {
			s.dedup.Settle(agent, hello.Watermark)
		}
		s.dedup.Unlock()
		if err != nil {
			return err
		}
	}
	rcv, err := delivery.NewReceiver(delivery.ReceiverConfig{
		QueueMsgs: s.cfg.QueueMessages, QueueBytes: s.cfg.QueueBytes, MaxMessageBytes: s.cfg.MaxMessageBytes,
	})
	if err != nil {
		return protocol.Errorf(protocol.StatusInternal, "receiver: %v", err)
	}
	// Hello carries the highest version the agent speaks; the sink picks
	// the highest both speak.
	if err := rcv.Step(delivery.Hello(hello.Version)); err != nil {
		return protocol.Errorf(protocol.StatusInternal, "receiver: %v", err)
	}
	var welcome *protocol.Welcome
	for _, a := range rcv.Ready() {
		switch a.Kind {
		case delivery.ActionWelcome:
			welcome = &protocol.Welcome{
				Credits:         protocol.Credits{Messages: a.MsgLimit, Bytes: a.ByteLimit},
				MaxMessageBytes: uint64(s.cfg.MaxMessageBytes),
				Version:         a.Version,
			}
		case delivery.ActionFail:
			return protocol.Errorf(protocol.StatusInvalid, "protocol version %d is not supported; this sink speaks version %d",
				hello.Version, protocol.Version)
		}
	}
	rcv.Advance()
	if welcome == nil {
		return protocol.Errorf(protocol.StatusInternal, "receiver did not welcome the agent")
	}
	known, err := s.dicts.Has(agent, hello.DictionaryIDs)
	if err != nil {
		s.log.Warn("sink: cannot list dictionaries", "agent_id", agent, "err", err)
	}
	welcome.DictionaryIDs = known
	welcome.SessionID = newSessionID()
	takesKafka := store.TakesKafkaRecords(s.store)
	// Only an agent that listed the codec reads a Welcome asking for it
	// (older agents do not know it; RSocket's Welcome carries the codec
	// byte only when one is asked).
	if (takesKafka || s.cfg.AskKafkaRecords) && slices.Contains(hello.Codecs, protocol.CodecKafkaZstd) {
		welcome.Codec = protocol.CodecKafkaZstd
	}
	po, _ := c.(protocol.PayloadOwner)
	st := &session{
		s: s, conn: c, agent: agent, hello: protocol.Hello{AgentID: agent, SentBelow: hello.SentBelow, HasSentBelow: hello.HasSentBelow}, agentB: []byte(agent), session: welcome.SessionID, rcv: rcv, vouched: vouched,
		acks:            store.NewAcks(),
		ownPayloads:     po != nil && po.PayloadsOwned(),
		storeTakesKafka: takesKafka,
		log:             s.log.With("agent_id", agent, "session", welcome.SessionID),
		ended:           make(chan error, 1),
		kick:            make(chan struct{}, 1),
		out:             make(chan protocol.Frame, 256),
		sendDone:        make(chan struct{}),
		done:            make(chan struct{}),
		statusCh:        make(chan *protocol.StoreStatus, 1),
	}
	st.flow.init(s)
	// With Kafka, the agent's messages wait until this sink has read
	// what every sink had stored when the Hello arrived (see the package
	// documentation).
	if st.gate = s.store.Gate(ctx); st.gate != nil {
		st.gated = true
	}
	// Listed before the Welcome: an agent that has its Welcome is in
	// Sink.Agents.
	s.addSendStream(st)
	defer s.removeSendStream(st)
	if err := c.Send(welcome); err != nil {
		return err
	}
	st.log.Info("sink: agent connected", "peer", peer.Addr, "agent_watermark", hello.Watermark,
		"credits", welcome.Credits.Messages, "dictionaries", known, "codec", welcome.Codec.String())
	return st.run(ctx)
}

func newSessionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// frameName names a first frame the way the sink always has ("plain",
// "no payload", ...), for errors agents may already match on.
func frameName(f protocol.Frame) string {
	switch f := f.(type) {
	case *protocol.Hello:
		return "hello"
	case *protocol.Message:
		return f.Codec.String()
	case *protocol.Dictionary:
		return "dictionary"
	case *protocol.Malformed:
		return f.Payload
	}
	return protocol.Name(f)
}

func (st *session) run(ctx context.Context) error {
	m := st.s.m
	m.streams.WithLabelValues("send").Inc()
	defer m.streams.WithLabelValues("send").Dec()
	go st.recvLoop(ctx)
	go st.sendLoop()
	err := st.loop(ctx)
	// done wakes a receiver waiting in flush; once it has let go of mu,
	// nothing sends on out again.
	close(st.done)
	st.locked(func() { st.refuse = true })
	// Let the sender deliver the last acks, but do not wait forever on an
	// agent that stopped reading.
	close(st.out)
	select {
	case <-st.sendDone:
	case <-time.After(5 * time.Second):
	}
	st.mu.Lock()
	stats := st.rcv.Stats()
	_ = st.rcv.Step(delivery.Close())
	st.mu.Unlock()
	st.log.Info("sink: agent stream ended", "received", stats.Received, "acked", stats.Acked,
		"over_credit", stats.OverCredit, "invalid", stats.Discarded, "err", err)
	return err
}

// errShutdown ends sessions that were still draining when the sink shut
// down.
var errShutdown = protocol.Errorf(protocol.StatusUnavailable, "sink is shutting down; resend what was not acked")

// loop is the session's driver loop. It returns the session's final
// status.
func (st *session) loop(ctx context.Context) error {
	ended := st.ended
	closing := st.s.closing
	var drainTimeout <-chan time.Time
	eof, draining := false, false
	for {
		var msgs int
		var wch chan<- store.Message
		var next store.Message
		st.locked(func() {
			msgs, _ = st.rcv.Queued()
			wch, next = st.nextHandOff()
		})
		if msgs == 0 {
			switch {
			case draining:
				return errShutdown
			case eof:
				return nil
			}
		}
		var err error
		select {
		case wch <- next:
			st.locked(st.handedOff)
		case <-st.kick:
		case <-st.gate:
			// The index now holds what every sink had stored at the
			// Hello: check the agent's bound on sent ids against all of it.
			if err := st.s.checkSentBelowLocked(st.hello); err != nil {
				return err
			}
			st.locked(func() { st.gate, st.gated = nil, false })
		case ss := <-st.statusCh:
			err = st.stepped(ctx, func() error {
				st.pending = append(st.pending, &protocol.Credit{Store: ss})
				return nil
			})
		case why := <-ended:
			if why != io.EOF {
				return why
			}
			// The agent closed its side: ack what is queued, then end.
			eof, ended = true, nil
		case <-st.acks.C():
			err = st.stepped(ctx, func() error { return st.handleStored(ctx) })
		case <-st.sendDone:
			return st.sendErr
		case <-ctx.Done():
			return ctxErr(ctx)
		case <-closing:
			// Take nothing more; wait for what is queued to be stored
			// and acked.
			st.locked(func() { st.refuse = true })
			closing, ended, draining = nil, nil, true
			drainTimeout = time.After(st.s.cfg.ShutdownTimeout)
		case <-drainTimeout:
			return errShutdown
		}
		if err != nil {
			return err
		}
	}
}

// locked runs f under mu.
func (st *session) locked(f func()) {
	st.mu.Lock()
	f()
	st.mu.Unlock()
}

// stepped runs f under mu, then sends the frames it produced.
func (st *session) stepped(ctx context.Context, f func() error) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := f(); err != nil {
		return err
	}
	return st.flush(ctx)
}

// step steps one thing the receiver found and sends what it produced. It
// reports false when the receiver should stop (the session is ending).
func (st *session) step(ctx context.Context, ev *inbound) bool {
	st.mu.Lock()
	if st.refuse {
		st.mu.Unlock()
		return false
	}
	held := len(st.held)
	var err error
	if ev.kind == inFatal {
		st.log.Warn("sink: protocol violation; ending the stream", "err", ev.err)
		err = ev.err
	} else {
		err = st.handle(ctx, ev)
	}
	if ferr := st.flush(ctx); err == nil {
		err = ferr
	}
	kick := len(st.held) > held
	st.mu.Unlock()
	if err != nil {
		st.stop(err)
		return false
	}
	if kick {
		select {
		case st.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// stop tells the loop why the receiver stopped. The first reason wins.
func (st *session) stop(why error) {
	select {
	case st.ended <- why:
	default:
	}
}

// errSessionOver stops a receiver's flush once the session has ended
// (the loop already returned the session's status).
var errSessionOver = protocol.Errorf(protocol.StatusCanceled, "session ended")

// ctxErr is why a session's context ended, as a session error; a cause
// set by Conn.Close comes first.
func ctxErr(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return cause
	}
	if ctx.Err() == context.DeadlineExceeded {
		return protocol.Errorf(protocol.StatusDeadlineExceeded, "%v", ctx.Err())
	}
	return protocol.Errorf(protocol.StatusCanceled, "%v", ctx.Err())
}

// handle steps one thing the receiver handed over.
func (st *session) handle(ctx context.Context, ev *inbound) error {
	switch ev.kind {
	case inMessage:
		if err := st.checkWindow(ctx, ev); err != nil {
			return err
		}
		enqueued := st.rcv.Stats().Enqueued
		if err := st.rcv.Step(delivery.Received(ev.id, ev.size)); err != nil {
			return protocol.Errorf(protocol.StatusInternal, "receiver: %v", err)
		}
		if st.rcv.Stats().Enqueued > enqueued {
			st.overBytes = 0
		}
		return st.act(ctx, &ev.msg)
	case inInvalid:
		st.s.m.rejected.WithLabelValues(ev.rej.reason).Inc()
		st.s.noteError("message %d of agent %s rejected (%s): %s", ev.id, st.agent, ev.rej.code, ev.rej.detail)
		st.logRejected(ev.id, ev.rej)
		st.reject(ev.id, ev.rej)
		// The agent counted it as sent: the Receiver hands its credit back.
		if err := st.rcv.Step(delivery.Discarded(ev.id, ev.size)); err != nil {
			return protocol.Errorf(protocol.StatusInternal, "receiver: %v", err)
		}
		return st.act(ctx, nil)
	case inDictionary:
		st.pending = append(st.pending, &protocol.Credit{DictionaryIDs: []uint32{ev.dictID}})
	case inHello:
		if err := st.rcv.Step(delivery.Hello(ev.version)); err != nil {
			return protocol.Errorf(protocol.StatusInternal, "receiver: %v", err)
		}
		return st.act(ctx, nil)
	}
	return nil
}

func (st *session) handleStored(ctx context.Context) error {
	ids, err := st.acks.Take()
	// ids becomes the next buffer for the writer once the Receiver has
	// read it (Step does not retain it).
	defer st.acks.Recycle(ids)
	if err != nil {
		return protocol.Errorf(protocol.StatusUnavailable, "the sink's store failed: %v", err)
	}
	if len(ids) == 0 {
		return nil
	}
	if err := st.rcv.Step(delivery.Stored(ids)); err != nil {
		return protocol.Errorf(protocol.StatusInternal, "receiver: %v", err)
	}
	return st.act(ctx, nil)
}

// act carries out the Receiver's actions. msg is the message just stepped
// Received, if any: the only one an Enqueue can be for.
func (st *session) act(ctx context.Context, msg *store.Message) error {
	var fail error
	m := st.s.m
	for _, a := range st.rcv.Ready() {
		switch a.Kind {
		case delivery.ActionEnqueue:
			if msg == nil || msg.ID != a.ID {
				st.log.Error("sink: Enqueue for a message not at hand; ignored", "message_id", a.ID)
				continue
			}
			st.enqueue(msg)
		case delivery.ActionAck:
			ack := &protocol.Ack{Ranges: make([]protocol.IDRange, len(a.Ranges))}
			for i, r := range a.Ranges {
				ack.Ranges[i] = protocol.IDRange{First: r.First, Last: r.Last}
				m.ackedMsgs.Add(float64(r.Last - r.First + 1))
			}
			m.acks.Inc()
			st.pending = append(st.pending, ack)
		case delivery.ActionGrant:
			st.creditsDirty = true
		case delivery.ActionReject:
			var rej rejection
			switch a.Reason {
			case delivery.ReasonOverCredit:
				rej = rejection{code: protocol.CodeOverCredit, reason: reasonOverCredit,
					detail: "sent beyond the granted credits; resend once credit allows"}
			case delivery.ReasonOversize:
				rej = rejection{code: protocol.CodeOversize, reason: reasonOversize,
					detail: fmt.Sprintf("larger than max_message_bytes %d", st.s.cfg.MaxMessageBytes)}
			default:
				rej = rejection{code: protocol.CodeUnspecified, reason: a.Reason.String(), detail: a.Reason.String()}
			}
			rej.retryable = a.Reason.Retryable()
			m.rejected.WithLabelValues(rej.reason).Inc()
			st.s.noteError("message %d of agent %s rejected (%s): %s", a.ID, st.agent, rej.code, rej.detail)
			st.logRejected(a.ID, rej)
			st.reject(a.ID, rej)
		case delivery.ActionFail:
			switch a.Reason {
			case delivery.ReasonDuplicateHello:
				fail = protocol.Errorf(protocol.StatusInvalid, "a second Hello on the stream")
			case delivery.ReasonNoHello:
				fail = protocol.Errorf(protocol.StatusInvalid, "a message before the Hello")
			case delivery.ReasonUnsupportedVersion:
				fail = protocol.Errorf(protocol.StatusInvalid, "unsupported protocol version")
			default:
				fail = protocol.Errorf(protocol.StatusInvalid, "protocol violation: %v", a.Reason)
			}
		}
	}
	st.rcv.Advance()
	if fail != nil {
		st.log.Warn("sink: protocol violation; ending the stream", "err", fail)
		if err := st.flush(ctx); err != nil {
			return err
		}
		return fail
	}
	return nil
}

// pushStatus makes ss the store status to tell the agent next, replacing
// one not told yet. Callers hold Sink.statusMu, so there is one at a time.
func (st *session) pushStatus(ss *protocol.StoreStatus) {
	for {
		select {
		case st.statusCh <- ss:
			return
		default:
		}
		select {
		case <-st.statusCh:
		default:
		}
	}
}

func (st *session) reject(id uint64, rej rejection) {
	st.pending = append(st.pending, &protocol.Error{MessageID: id, Code: rej.code, Detail: rej.detail, Retryable: rej.retryable})
}

// flush hands the pending frames to the sender, new credits last (carried
// by a trailing Credit or Error that has none yet: on gRPC one
// ServiceMessage, as the sink has always sent it).
func (st *session) flush(ctx context.Context) error {
	if st.creditsDirty {
		st.creditsDirty = false
		ml, bl := st.rcv.Limits()
		cr := &protocol.Credits{Messages: ml, Bytes: bl}
		folded := false
		if n := len(st.pending); n > 0 {
			switch f := st.pending[n-1].(type) {
			case *protocol.Credit:
				if f.Credits == nil {
					f.Credits, folded = cr, true
				}
			case *protocol.Error:
				if f.Credits == nil {
					f.Credits, folded = cr, true
				}
			}
		}
		if !folded {
			st.pending = append(st.pending, &protocol.Credit{Credits: cr})
		}
	}
	for i, f := range st.pending {
		select {
		case st.out <- f:
		case <-st.sendDone:
			clear(st.pending)
			st.pending = st.pending[:0]
			return st.sendErr
		case <-st.done:
			clear(st.pending)
			st.pending = st.pending[:0]
			return errSessionOver
		case <-ctx.Done():
			return ctxErr(ctx)
		}
		st.pending[i] = nil
	}
	st.pending = st.pending[:0]
	return nil
}

// sendLoop is the only goroutine that sends on the session.
func (st *session) sendLoop() {
	defer close(st.sendDone)
	for f := range st.out {
		if err := st.conn.Send(f); err != nil {
			st.sendErr = err
			return
		}
	}
}

// logRejected logs a rejected message, at most once a minute per session
// (sluice_sink_rejected_total counts every one).
func (st *session) logRejected(id uint64, rej rejection) {
	if !st.rejectLog.Due(time.Now(), time.Minute) {
		st.rejectQuiet++
		return
	}
	st.log.Warn("sink: message rejected", "message_id", id, "code", rej.code.String(), "retryable", rej.retryable,
		"detail", rej.detail, "not_logged_since", st.rejectQuiet)
	st.rejectQuiet = 0
}
