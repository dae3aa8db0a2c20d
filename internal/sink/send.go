package sink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/delivery"
)

// protocolVersion is the Request/Response version this sink speaks.
const protocolVersion = delivery.ProtocolVersion

// sendStream drives one Send stream. Three goroutines share it:
//
//   - the receiver (recvLoop) reads Requests, validates batches (which
//     decompresses them), stores dictionary uploads, and hands the results
//     to the loop in order;
//   - the loop (the handler's goroutine) owns the delivery.Receiver: it
//     steps Received and Stored events, hands Enqueued messages to the
//     storage writer and turns the other actions into Responses;
//   - the sender (sendLoop) is the only goroutine calling stream.Send.
//
// The storage writer reports stored ids through reportStored, which never
// blocks, so a slow agent cannot hold up the writer.
type sendStream struct {
	s       *Sink
	stream  grpc.BidiStreamingServer[sluicev1.Request, sluicev1.Response]
	agent   string
	agentB  []byte
	session string
	log     *slog.Logger
	rcv     *delivery.Receiver

	in       chan inbound
	out      chan *sluicev1.Response
	sendDone chan struct{} // closed when sendLoop returns
	sendErr  error         // why sendLoop stopped early; read after sendDone
	done     chan struct{} // closed when the loop returns

	// pending are the responses of the current step, sent by flush.
	pending      []*sluicev1.Response
	creditsDirty bool

	// overBytes sums the messages received beyond the byte credit since
	// the last one queued (see checkWindow).
	overBytes int64

	// pipeBytes are the payload bytes of batches the receiver validated
	// and the loop has not taken yet; the receiver stops reading beyond
	// QueueBytes + MaxMessageBytes (a well-behaved agent never has more in
	// flight), so an agent that ignores its credits while the loop is busy
	// is held by HTTP/2 flow control, not buffered. pipeFree (capacity 1)
	// is signalled when the loop takes some.
	pipeBytes atomic.Int64
	pipeFree  chan struct{}

	// held are messages the Receiver enqueued that are not yet with the
	// storage writer: while the store's gate is closed (gated), or while
	// the writer's channel is full. The loop hands them over in order
	// without ever blocking on the writer.
	held     []writeItem
	heldHead int
	gate     <-chan struct{}
	gated    bool

	// statusCh (capacity 1) holds the latest store status to tell the
	// agent.
	statusCh chan *sluicev1.StoreStatus

	// Reports from the storage writer, under mu; storedCh (capacity 1) is
	// signalled after each batch of them.
	mu       sync.Mutex
	stored   []uint64
	storeErr error
	storedCh chan struct{}
	spare    []uint64
}

// inKind says what the receiver hands the loop.
type inKind uint8

const (
	inMessage    inKind = iota // a valid batch, in item
	inInvalid                  // a batch that failed validation, in rej
	inDictionary               // dictionary dictID was uploaded and stored
	inHello                    // a second Hello
	inEnd                      // Recv failed with err (io.EOF: the agent closed its side)
	inFatal                    // a protocol violation: end the stream with err
)

type inbound struct {
	kind    inKind
	id      uint64 // message id
	size    int64  // payload bytes as sent
	item    writeItem
	rej     rejection
	dictID  uint32
	version uint32
	err     error
}

// rejection is why a batch was refused, for the agent, the log and the
// metrics.
type rejection struct {
	code      sluicev1.ErrorCode
	reason    string // metric label
	detail    string
	retryable bool
}

// Send implements Sink.Send. See the package documentation for the
// protocol.
func (svc *service) Send(stream grpc.BidiStreamingServer[sluicev1.Request, sluicev1.Response]) error {
	s := svc.s
	if err := s.accepting(); err != nil {
		return err
	}
	ctx := stream.Context()
	req, err := recvFirst(s, ctx, stream.Recv, "Hello")
	if err == io.EOF {
		return status.Error(codes.InvalidArgument, "stream closed before its Hello")
	}
	if err != nil {
		return err
	}
	peerAddr := ""
	if p, ok := peer.FromContext(ctx); ok {
		peerAddr = p.Addr.String()
	}
	hello := req.GetHello()
	if hello == nil {
		s.log.Warn("sink: Send stream without Hello", "peer", peerAddr, "first", payloadName(req))
		return status.Errorf(codes.InvalidArgument, "the first Request of a Send stream must carry a Hello, not %s", payloadName(req))
	}
	if req.GetVersion() != protocolVersion {
		return status.Errorf(codes.InvalidArgument, "Request.version %d is not supported; this sink speaks version %d", req.GetVersion(), protocolVersion)
	}
	agent := hello.GetAgentId()
	if agent == "" || len(agent) > maxAgentID {
		return status.Errorf(codes.InvalidArgument, "Hello.agent_id of %d bytes: want 1 to %d", len(agent), maxAgentID)
	}
	if err := s.checkSend(ctx, agent, peerAddr); err != nil {
		return err
	}
	rcv, err := delivery.NewReceiver(delivery.ReceiverConfig{
		QueueMsgs: s.cfg.QueueMessages, QueueBytes: s.cfg.QueueBytes, MaxMessageBytes: s.cfg.MaxMessageBytes,
	})
	if err != nil {
		return status.Errorf(codes.Internal, "receiver: %v", err)
	}
	// Hello carries the highest version the agent speaks; the sink picks
	// the highest both speak.
	if err := rcv.Step(delivery.Hello(hello.GetProtocolVersion())); err != nil {
		return status.Errorf(codes.Internal, "receiver: %v", err)
	}
	var welcome *sluicev1.Welcome
	for _, a := range rcv.Ready() {
		switch a.Kind {
		case delivery.ActionWelcome:
			welcome = &sluicev1.Welcome{
				Credits:         &sluicev1.Credits{MessageLimit: a.MsgLimit, ByteLimit: a.ByteLimit},
				MaxMessageBytes: uint64(s.cfg.MaxMessageBytes),
				ProtocolVersion: a.Version,
			}
		case delivery.ActionFail:
			return status.Errorf(codes.InvalidArgument, "protocol version %d is not supported; this sink speaks version %d",
				hello.GetProtocolVersion(), protocolVersion)
		}
	}
	rcv.Advance()
	if welcome == nil {
		return status.Error(codes.Internal, "receiver did not welcome the agent")
	}
	known, err := s.dicts.has(agent, hello.GetDictionaryIds())
	if err != nil {
		s.log.Warn("sink: cannot list dictionaries", "agent_id", agent, "err", err)
	}
	welcome.DictionaryIds = known
	welcome.SessionId = newSessionID()
	if err := stream.Send(&sluicev1.Response{Version: protocolVersion, Body: &sluicev1.Response_Welcome{Welcome: welcome}}); err != nil {
		return err
	}
	st := &sendStream{
		s: s, stream: stream, agent: agent, agentB: []byte(agent), session: welcome.SessionId, rcv: rcv,
		log:      s.log.With("agent_id", agent, "session", welcome.SessionId),
		in:       make(chan inbound, 64),
		out:      make(chan *sluicev1.Response, 256),
		sendDone: make(chan struct{}),
		done:     make(chan struct{}),
		storedCh: make(chan struct{}, 1),
		statusCh: make(chan *sluicev1.StoreStatus, 1),
		pipeFree: make(chan struct{}, 1),
	}
	// With Kafka, the agent's messages wait until this sink has read
	// what every sink had stored when the Hello arrived (see the package
	// documentation).
	if st.gate = s.store.gate(ctx); st.gate != nil {
		st.gated = true
	}
	s.addSendStream(st)
	defer s.removeSendStream(st)
	st.log.Info("sink: agent connected", "peer", peerAddr, "agent_watermark", hello.GetWatermark(),
		"credits", welcome.Credits.MessageLimit, "dictionaries", known)
	return st.run(ctx)
}

func newSessionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func payloadName(req *sluicev1.Request) string {
	switch req.GetPayload().(type) {
	case *sluicev1.Request_Hello:
		return "hello"
	case *sluicev1.Request_Plain:
		return "plain"
	case *sluicev1.Request_Zstd:
		return "zstd"
	case *sluicev1.Request_ZstdDict:
		return "zstd_dict"
	case *sluicev1.Request_Dictionary:
		return "dictionary"
	}
	return "no payload"
}

func (st *sendStream) run(ctx context.Context) error {
	m := st.s.m
	m.streams.WithLabelValues("send").Inc()
	defer m.streams.WithLabelValues("send").Dec()
	go st.recvLoop(ctx)
	go st.sendLoop()
	err := st.loop(ctx)
	close(st.done)
	// Let the sender deliver the last acks, but do not wait forever on an
	// agent that stopped reading.
	close(st.out)
	select {
	case <-st.sendDone:
	case <-time.After(5 * time.Second):
	}
	stats := st.rcv.Stats()
	_ = st.rcv.Step(delivery.Close())
	st.log.Info("sink: agent stream ended", "received", stats.Received, "acked", stats.Acked,
		"over_credit", stats.OverCredit, "invalid", stats.Discarded, "err", err)
	return err
}

// loop is the stream's driver loop. It returns the stream's final status.
func (st *sendStream) loop(ctx context.Context) error {
	in := st.in
	closing := st.s.closing
	var drainTimeout <-chan time.Time
	eof, draining := false, false
	for {
		if msgs, _ := st.rcv.Queued(); msgs == 0 {
			switch {
			case draining:
				return status.Error(codes.Unavailable, "sink is shutting down; resend what was not acked")
			case eof:
				return nil
			}
		}
		var (
			wch  chan writeItem
			next writeItem
		)
		if !st.gated && st.heldHead < len(st.held) {
			wch, next = st.s.writeCh, st.held[st.heldHead]
		}
		select {
		case wch <- next:
			st.handed(&next)
			st.held[st.heldHead] = writeItem{}
			if st.heldHead++; st.heldHead == len(st.held) {
				st.held, st.heldHead = st.held[:0], 0
			}
		case <-st.gate:
			st.gate, st.gated = nil, false
		case ss := <-st.statusCh:
			st.pending = append(st.pending, serviceMessage(&sluicev1.ServiceMessage{StoreStatus: ss}))
		case ev := <-in:
			if ev.size > 0 {
				st.pipeBytes.Add(-ev.size)
				select {
				case st.pipeFree <- struct{}{}:
				default:
				}
			}
			switch ev.kind {
			case inEnd:
				if ev.err != io.EOF {
					return ev.err
				}
				// The agent closed its side: ack what is queued, then end.
				eof, in = true, nil
			case inFatal:
				st.log.Warn("sink: protocol violation; ending the stream", "err", ev.err)
				if err := st.flush(ctx); err != nil {
					return err
				}
				return ev.err
			default:
				if err := st.handle(ctx, &ev); err != nil {
					return err
				}
			}
		case <-st.storedCh:
			if err := st.handleStored(ctx); err != nil {
				return err
			}
		case <-st.sendDone:
			return st.sendErr
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-closing:
			// Take nothing more; wait for what is queued to be stored
			// and acked.
			closing, in, draining = nil, nil, true
			drainTimeout = time.After(st.s.cfg.ShutdownTimeout)
		case <-drainTimeout:
			return status.Error(codes.Unavailable, "sink is shutting down; resend what was not acked")
		}
		if err := st.flush(ctx); err != nil {
			return err
		}
	}
}

// handle steps one thing the receiver handed over.
func (st *sendStream) handle(ctx context.Context, ev *inbound) error {
	switch ev.kind {
	case inMessage:
		if err := st.checkWindow(ctx, ev); err != nil {
			return err
		}
		enqueued := st.rcv.Stats().Enqueued
		if err := st.rcv.Step(delivery.Received(ev.id, ev.size)); err != nil {
			return status.Errorf(codes.Internal, "receiver: %v", err)
		}
		if st.rcv.Stats().Enqueued > enqueued {
			st.overBytes = 0
		}
		return st.act(ctx, &ev.item)
	case inInvalid:
		st.s.m.rejected.WithLabelValues(ev.rej.reason).Inc()
		st.log.Warn("sink: message rejected", "message_id", ev.id, "code", ev.rej.code.String(),
			"retryable", ev.rej.retryable, "detail", ev.rej.detail)
		st.reject(ev.id, ev.rej)
		// The agent counted it as sent: the Receiver hands its credit back.
		if err := st.rcv.Step(delivery.Discarded(ev.id, ev.size)); err != nil {
			return status.Errorf(codes.Internal, "receiver: %v", err)
		}
		return st.act(ctx, nil)
	case inDictionary:
		st.pending = append(st.pending, serviceMessage(&sluicev1.ServiceMessage{DictionaryIds: []uint32{ev.dictID}}))
	case inHello:
		if err := st.rcv.Step(delivery.Hello(ev.version)); err != nil {
			return status.Errorf(codes.Internal, "receiver: %v", err)
		}
		return st.act(ctx, nil)
	}
	return nil
}

// checkWindow ends the stream with OUT_OF_WINDOW when the agent sends
// beyond the credits it was granted, instead of receiving, decompressing
// and rejecting a flood (which held hundreds of MB per stream).
//
// A well-behaved Sender never sends a message when its message credit is
// used up, and every message it sends within its byte credit fits the
// queue (the credit left is the queue's free room). The one exception is
// the empty-pipe waiver (see delivery.Sender.fits): with nothing in flight
// in its view it may send one message beyond its byte credit, which the
// Receiver rejects as OVER_CREDIT (retryable) if the queue still holds
// something. So: no message credit left is a violation at once; messages
// over the byte credit are tolerated up to max(QueueBytes,
// MaxMessageBytes) of them since the last message queued, which waivers
// never reach (they come one at a time, each after the agent saw its last
// message acked, rejected or timed out).
func (st *sendStream) checkWindow(ctx context.Context, ev *inbound) error {
	cfg := &st.s.cfg
	msgs, queued := st.rcv.Queued()
	var detail string
	switch {
	case msgs >= cfg.QueueMessages:
		detail = fmt.Sprintf("message sent with no message credit left (%d queued, the stream's limit)", msgs)
	case msgs > 0 && queued+ev.size > cfg.QueueBytes:
		st.overBytes += ev.size
		if tolerated := max(cfg.QueueBytes, cfg.MaxMessageBytes); st.overBytes > tolerated {
			detail = fmt.Sprintf("%d bytes sent beyond the byte credit since the last message queued (tolerated: %d)", st.overBytes, tolerated)
		}
	}
	if detail == "" {
		return nil
	}
	st.s.m.streamsCut.WithLabelValues(cutOutOfWindow).Inc()
	st.log.Warn("sink: agent ignores its credits; ending the stream", "message_id", ev.id, "detail", detail)
	// Retryable: the message itself is fine, and may be resent on a new
	// stream within its credits.
	st.reject(ev.id, rejection{code: sluicev1.ErrorCode_ERROR_CODE_OUT_OF_WINDOW, retryable: true,
		detail: "sent beyond the granted credits: " + detail})
	if err := st.flush(ctx); err != nil {
		return err
	}
	return status.Errorf(codes.ResourceExhausted, "sent beyond the granted credits: %s", detail)
}

func (st *sendStream) handleStored(ctx context.Context) error {
	st.mu.Lock()
	ids, err := st.stored, st.storeErr
	st.stored, st.spare = st.spare[:0], nil
	st.mu.Unlock()
	// ids becomes the next buffer for the writer once the Receiver has
	// read it (Step does not retain it).
	defer func() { st.spare = ids }()
	if err != nil {
		return status.Errorf(codes.Unavailable, "the sink's store failed: %v", err)
	}
	if len(ids) == 0 {
		return nil
	}
	if err := st.rcv.Step(delivery.Stored(ids)); err != nil {
		return status.Errorf(codes.Internal, "receiver: %v", err)
	}
	return st.act(ctx, nil)
}

// act carries out the Receiver's actions. item is the message just
// stepped Received, if any: the only one an Enqueue can be for.
func (st *sendStream) act(ctx context.Context, item *writeItem) error {
	var fail error
	m := st.s.m
	for _, a := range st.rcv.Ready() {
		switch a.Kind {
		case delivery.ActionEnqueue:
			if item == nil || item.id != a.ID {
				st.log.Error("sink: Enqueue for a message not at hand; ignored", "message_id", a.ID)
				continue
			}
			if !st.gated && st.heldHead == len(st.held) {
				select {
				case st.s.writeCh <- *item:
					st.handed(item)
					continue
				default:
				}
			}
			st.held = append(st.held, *item)
		case delivery.ActionAck:
			ack := &sluicev1.Ack{Ranges: make([]*sluicev1.IdRange, len(a.Ranges))}
			for i, r := range a.Ranges {
				ack.Ranges[i] = &sluicev1.IdRange{First: r.First, Last: r.Last}
				m.ackedMsgs.Add(float64(r.Last - r.First + 1))
			}
			m.acks.Inc()
			st.pending = append(st.pending, &sluicev1.Response{Version: protocolVersion, Body: &sluicev1.Response_Ack{Ack: ack}})
		case delivery.ActionGrant:
			st.creditsDirty = true
		case delivery.ActionReject:
			var rej rejection
			switch a.Reason {
			case delivery.ReasonOverCredit:
				rej = rejection{code: sluicev1.ErrorCode_ERROR_CODE_OVER_CREDIT, reason: reasonOverCredit, retryable: true,
					detail: "sent beyond the granted credits; resend once credit allows"}
			case delivery.ReasonOversize:
				rej = rejection{code: sluicev1.ErrorCode_ERROR_CODE_OVERSIZE, reason: reasonOversize,
					detail: fmt.Sprintf("larger than max_message_bytes %d", st.s.cfg.MaxMessageBytes)}
			default:
				rej = rejection{code: sluicev1.ErrorCode_ERROR_CODE_UNSPECIFIED, reason: a.Reason.String(), detail: a.Reason.String()}
			}
			rej.retryable = a.Reason.Retryable()
			m.rejected.WithLabelValues(rej.reason).Inc()
			st.log.Warn("sink: message rejected", "message_id", a.ID, "code", rej.code.String(), "retryable", rej.retryable, "detail", rej.detail)
			st.reject(a.ID, rej)
		case delivery.ActionFail:
			switch a.Reason {
			case delivery.ReasonDuplicateHello:
				fail = status.Error(codes.InvalidArgument, "a second Hello on the stream")
			case delivery.ReasonNoHello:
				fail = status.Error(codes.InvalidArgument, "a message before the Hello")
			case delivery.ReasonUnsupportedVersion:
				fail = status.Error(codes.InvalidArgument, "unsupported protocol version")
			default:
				fail = status.Errorf(codes.InvalidArgument, "protocol violation: %v", a.Reason)
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

// handed counts a message given to the storage writer.
func (st *sendStream) handed(item *writeItem) {
	st.s.m.queuedMsgs.Inc()
	st.s.m.queuedBytes.Add(float64(len(item.body)))
}

// pushStatus makes ss the store status to tell the agent next, replacing
// one not told yet. Callers hold Sink.statusMu, so there is one at a time.
func (st *sendStream) pushStatus(ss *sluicev1.StoreStatus) {
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

func (st *sendStream) reject(id uint64, rej rejection) {
	st.pending = append(st.pending, serviceMessage(&sluicev1.ServiceMessage{Error: &sluicev1.MessageError{
		MessageId: id, Code: rej.code, Detail: rej.detail, Retryable: rej.retryable,
	}}))
}

func serviceMessage(sm *sluicev1.ServiceMessage) *sluicev1.Response {
	return &sluicev1.Response{Version: protocolVersion, Body: &sluicev1.Response_Info{Info: sm}}
}

// flush hands the pending responses to the sender, new credits last
// (folded into a trailing ServiceMessage when there is one).
func (st *sendStream) flush(ctx context.Context) error {
	if st.creditsDirty {
		st.creditsDirty = false
		ml, bl := st.rcv.Limits()
		cr := &sluicev1.Credits{MessageLimit: ml, ByteLimit: bl}
		if n := len(st.pending); n > 0 && st.pending[n-1].GetInfo() != nil && st.pending[n-1].GetInfo().Credits == nil {
			st.pending[n-1].GetInfo().Credits = cr
		} else {
			st.pending = append(st.pending, serviceMessage(&sluicev1.ServiceMessage{Credits: cr}))
		}
	}
	for i, r := range st.pending {
		select {
		case st.out <- r:
		case <-st.sendDone:
			clear(st.pending)
			st.pending = st.pending[:0]
			return st.sendErr
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		st.pending[i] = nil
	}
	st.pending = st.pending[:0]
	return nil
}

// sendLoop is the only goroutine that sends on the stream.
func (st *sendStream) sendLoop() {
	defer close(st.sendDone)
	for r := range st.out {
		if err := st.stream.Send(r); err != nil {
			st.sendErr = err
			return
		}
	}
}

// reportStored is called by the storage writer: id is durable.
func (st *sendStream) reportStored(id uint64) {
	st.mu.Lock()
	st.stored = append(st.stored, id)
	st.mu.Unlock()
}

// reportFailure is called by the storage writer when a message of this
// stream could not be stored; the stream ends so the agent resends.
func (st *sendStream) reportFailure(err error) {
	st.mu.Lock()
	if st.storeErr == nil {
		st.storeErr = err
	}
	st.mu.Unlock()
	st.notify()
}

func (st *sendStream) notify() {
	select {
	case st.storedCh <- struct{}{}:
	default:
	}
}

// recvLoop reads the stream and hands the loop what it finds, in order.
func (st *sendStream) recvLoop(ctx context.Context) {
	dec := codec.NewDecoder(int(st.s.cfg.MaxMessageBytes))
	for {
		req, err := st.stream.Recv()
		if err != nil {
			st.deliver(inbound{kind: inEnd, err: err})
			return
		}
		var ev inbound
		switch p := req.GetPayload().(type) {
		case *sluicev1.Request_Hello:
			ev = inbound{kind: inHello, version: p.Hello.GetProtocolVersion()}
		case *sluicev1.Request_Dictionary:
			ev = st.upload(req, p.Dictionary, dec)
		default:
			ev = st.check(req, dec)
		}
		if ev.size > 0 && !st.reserve(ev.size) {
			return
		}
		if !st.deliver(ev) {
			return
		}
	}
}

// reserve waits until size more bytes fit the pipeline to the loop (see
// pipeBytes) and counts them. A message always fits an empty pipeline. It
// reports false if the stream ended meanwhile.
func (st *sendStream) reserve(size int64) bool {
	budget := st.s.cfg.QueueBytes + st.s.cfg.MaxMessageBytes
	for {
		if cur := st.pipeBytes.Load(); cur == 0 || cur+size <= budget {
			st.pipeBytes.Add(size)
			return true
		}
		select {
		case <-st.pipeFree:
		case <-st.done:
			return false
		}
	}
}

func (st *sendStream) deliver(ev inbound) bool {
	select {
	case st.in <- ev:
		return true
	case <-st.done:
		return false
	}
}

// upload validates and durably stores an uploaded dictionary. A bad
// upload is a protocol violation that ends the stream: messages using the
// dictionary could never be decoded.
func (st *sendStream) upload(req *sluicev1.Request, d *sluicev1.Dictionary, dec *codec.Decoder) inbound {
	fatal := func(c codes.Code, format string, args ...any) inbound {
		return inbound{kind: inFatal, err: status.Errorf(c, format, args...)}
	}
	if req.GetVersion() != protocolVersion {
		return fatal(codes.InvalidArgument, "dictionary upload with Request.version %d; this sink speaks version %d", req.GetVersion(), protocolVersion)
	}
	if d.GetId() == 0 {
		return fatal(codes.InvalidArgument, "dictionary upload with id 0")
	}
	dict, err := codec.ParseDictionary(d.GetData())
	if err != nil {
		return fatal(codes.InvalidArgument, "dictionary %d: %v", d.GetId(), err)
	}
	if dict.ID != d.GetId() {
		return fatal(codes.InvalidArgument, "dictionary uploaded as id %d has id %d in its zstd header", d.GetId(), dict.ID)
	}
	if err := st.s.dicts.put(st.agent, dict); err != nil {
		if errors.Is(err, errDictConflict) || errors.Is(err, errTooManyDicts) {
			return fatal(codes.InvalidArgument, "dictionary %d: %v", dict.ID, err)
		}
		st.log.Error("sink: cannot store dictionary", "dictionary_id", dict.ID, "err", err)
		return fatal(codes.Unavailable, "dictionary %d could not be stored", dict.ID)
	}
	if err := dec.AddDictionary(dict); err != nil {
		return fatal(codes.InvalidArgument, "dictionary %d: %v", dict.ID, err)
	}
	st.s.m.dictUploads.Inc()
	st.log.Info("sink: dictionary stored", "dictionary_id", dict.ID, "bytes", len(dict.Data))
	return inbound{kind: inDictionary, dictID: dict.ID}
}

// decodeBufs recycles the buffers batches are decompressed into for
// validation, across streams.
var decodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// check validates one batch Request: version, payload present, size as
// sent, decompression (with the agent's dictionary), batch format and
// record count. Decompressing every compressed batch costs CPU, but it is
// the only way to be sure the store never holds a message its readers
// cannot decode.
func (st *sendStream) check(req *sluicev1.Request, dec *codec.Decoder) inbound {
	limit := st.s.cfg.MaxMessageBytes
	var (
		body   []byte
		kind   codec.Kind
		dictID uint32
	)
	switch p := req.GetPayload().(type) {
	case *sluicev1.Request_Plain:
		body, kind = p.Plain, codec.Plain
	case *sluicev1.Request_Zstd:
		body, kind = p.Zstd, codec.Zstd
	case *sluicev1.Request_ZstdDict:
		body, kind, dictID = p.ZstdDict.GetData(), codec.ZstdDict, p.ZstdDict.GetDictionaryId()
	}
	id, size := req.GetMessageId(), int64(len(body))
	st.s.m.receivedMsgs.Inc()
	st.s.m.receivedBytes.Add(float64(size))
	reject := func(code sluicev1.ErrorCode, reason string, retryable bool, format string, args ...any) inbound {
		return inbound{kind: inInvalid, id: id, size: size, rej: rejection{
			code: code, reason: reason, retryable: retryable, detail: fmt.Sprintf(format, args...)}}
	}
	const (
		badPayload = sluicev1.ErrorCode_ERROR_CODE_BAD_PAYLOAD
		oversize   = sluicev1.ErrorCode_ERROR_CODE_OVERSIZE
		unknown    = sluicev1.ErrorCode_ERROR_CODE_UNKNOWN_DICTIONARY
	)
	switch {
	case req.GetVersion() != protocolVersion:
		return reject(badPayload, reasonVersion, false, "Request.version %d is not supported; this stream speaks version %d", req.GetVersion(), protocolVersion)
	case req.GetPayload() == nil:
		return reject(badPayload, reasonNoPayload, false, "Request without a payload")
	case size > limit:
		return reject(oversize, reasonOversize, false, "payload of %d bytes exceeds max_message_bytes %d", size, limit)
	case kind == codec.ZstdDict && dictID == 0:
		return reject(badPayload, reasonCorrupt, false, "zstd_dict payload with dictionary_id 0")
	}
	if kind == codec.ZstdDict && !dec.HasDictionary(dictID) {
		dict, ok, err := st.s.dicts.get(st.agent, dictID)
		if err != nil {
			st.log.Error("sink: cannot load dictionary", "dictionary_id", dictID, "err", err)
		}
		if !ok {
			return reject(unknown, reasonUnknownDict, true, "dictionary %d is not known for this agent: upload it, then resend", dictID)
		}
		if err := dec.AddDictionary(dict); err != nil {
			st.log.Error("sink: cannot load dictionary", "dictionary_id", dictID, "err", err)
			return reject(unknown, reasonUnknownDict, true, "dictionary %d cannot be loaded", dictID)
		}
	}
	decoded := body
	if kind != codec.Plain {
		bufp := decodeBufs.Get().(*[]byte)
		defer func() {
			if cap(*bufp) <= 8<<20 {
				decodeBufs.Put(bufp)
			}
		}()
		var err error
		decoded, err = dec.Decode((*bufp)[:0], body, kind, dictID)
		*bufp = decoded[:0]
		switch {
		case errors.Is(err, codec.ErrTooLarge):
			return reject(oversize, reasonOversize, false, "payload decompresses to more than max_message_bytes %d", limit)
		case errors.Is(err, codec.ErrUnknownDictionary):
			return reject(unknown, reasonUnknownDict, true, "%v", err)
		case err != nil:
			return reject(badPayload, reasonCorrupt, false, "payload does not decompress: %v", err)
		}
	}
	n, err := batch.Count(decoded)
	if err != nil {
		return reject(badPayload, reasonBatch, false, "not a valid batch: %v", err)
	}
	if n == 0 {
		// Nothing to store, and a flood of them would still cost an
		// append and an fdatasync each.
		return reject(badPayload, reasonEmpty, false, "empty batch: a message holds at least one record")
	}
	if uint64(n) != uint64(req.GetRecordCount()) {
		return reject(badPayload, reasonCount, false, "record_count %d, but the batch holds %d records", req.GetRecordCount(), n)
	}
	if rl := st.s.recordLimit(); rl > 0 {
		// Kafka takes records up to the topic's max.message.bytes.
		longest := 0
		_ = batch.Decode(decoded, func(rec []byte) error {
			longest = max(longest, len(rec))
			return nil
		})
		if longest > rl {
			return reject(oversize, reasonOversize, false, "a record of %d bytes is larger than the Kafka topic takes (%d bytes; its max.message.bytes less overhead)", longest, rl)
		}
	}
	st.s.m.decodedBytes.Add(float64(len(decoded)))
	return inbound{kind: inMessage, id: id, size: size, item: writeItem{
		st: st, agent: st.agent, agentB: st.agentB, id: id, codec: kind, dictID: dictID, count: req.GetRecordCount(), body: body,
	}}
}
