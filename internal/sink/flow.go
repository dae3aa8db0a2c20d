package sink

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/store"
)

// flow is a session's flow control apart from the credits themselves
// (which the delivery.Receiver keeps): what the agent sent beyond its
// credits, and the messages waiting to be handed to the storage writer.
// The session's mu guards it.
type flow struct {
	s *Sink

	// overBytes sums the messages received beyond the byte credit since
	// the last one queued (see checkWindow).
	overBytes int64

	// held are messages the Receiver enqueued that are not yet with the
	// storage writer: while the store's gate is closed (gated), or while
	// the writer's channel is full. The loop hands them over in order
	// without ever blocking on the writer.
	held     []store.Message
	heldHead int
	gate     <-chan struct{}
	gated    bool
}

func (f *flow) init(s *Sink) {
	f.s = s
}

// enqueue hands msg to the storage writer at once if nothing is held
// before it and the writer's channel has room, else holds it.
func (f *flow) enqueue(msg *store.Message) {
	if !f.gated && f.heldHead == len(f.held) {
		select {
		case f.s.writeCh <- *msg:
			f.handed(msg)
			return
		default:
		}
	}
	f.held = append(f.held, *msg)
}

// nextHandOff is the writer's channel and the next held message, or a nil
// channel (which never takes) when there is none or the gate is closed.
func (f *flow) nextHandOff() (chan<- store.Message, store.Message) {
	if f.gated || f.heldHead == len(f.held) {
		return nil, store.Message{}
	}
	return f.s.writeCh, f.held[f.heldHead]
}

// handedOff drops the held message nextHandOff returned, which the writer
// took.
func (f *flow) handedOff() {
	f.handed(&f.held[f.heldHead])
	f.held[f.heldHead] = store.Message{}
	if f.heldHead++; f.heldHead == len(f.held) {
		f.held, f.heldHead = f.held[:0], 0
	}
}

// handed counts a message given to the storage writer.
func (f *flow) handed(msg *store.Message) {
	f.s.m.queuedMsgs.Inc()
	f.s.m.queuedBytes.Add(float64(len(msg.Body)))
}

// checkWindow ends the session with OUT_OF_WINDOW when the agent sends
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
func (st *session) checkWindow(ctx context.Context, ev *inbound) error {
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
	st.s.noteError("agent %s ignores its credits; stream ended: %s", st.agent, detail)
	st.log.Warn("sink: agent ignores its credits; ending the stream", "message_id", ev.id, "detail", detail)
	// Retryable: the message itself is fine, and may be resent on a new
	// session within its credits.
	st.reject(ev.id, rejection{code: protocol.CodeOutOfWindow, retryable: true,
		detail: "sent beyond the granted credits: " + detail})
	if err := st.flush(ctx); err != nil {
		return err
	}
	return protocol.Errorf(protocol.StatusResourceExhausted, "sent beyond the granted credits: %s", detail)
}
