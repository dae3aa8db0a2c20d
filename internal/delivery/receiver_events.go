package delivery

import "fmt"

// ReceiverEventKind says which of the Receiver's inputs a ReceiverEvent is.
type ReceiverEventKind uint8

const (
	receiverEventUnknown ReceiverEventKind = iota
	// EventHello: the agent opened the stream speaking protocol Version.
	EventHello
	// EventReceived: message ID of Size bytes arrived on the stream.
	EventReceived
	// EventDiscarded: the driver refused message ID of Size bytes itself
	// (it failed validation: a body that does not decode, say) and told the
	// agent why. It counts as received, so its credit goes back to the
	// agent, but it is never queued.
	EventDiscarded
	// EventStored: the storage writer durably stored the ids in IDs, or
	// found them already stored (dedup is the writer's job, and a
	// duplicate must be acked like an original).
	EventStored
	// EventClose: the stream ended.
	EventClose
)

var receiverEventKindNames = [...]string{
	receiverEventUnknown: "Unknown",
	EventHello:           "Hello",
	EventReceived:        "Received",
	EventDiscarded:       "Discarded",
	EventStored:          "Stored",
	EventClose:           "Close",
}

func (k ReceiverEventKind) String() string {
	if int(k) < len(receiverEventKindNames) {
		return receiverEventKindNames[k]
	}
	return fmt.Sprintf("ReceiverEventKind(%d)", uint8(k))
}

// ReceiverEvent is one input to Receiver.Step; see Event for why it is a
// tagged struct.
type ReceiverEvent struct {
	Kind    ReceiverEventKind
	Version uint32 // Hello
	ID      uint64 // Received
	Size    int64  // Received: body size in bytes; >= 0
	// IDs (Stored) may be in any order and repeat ids. The Receiver reads
	// it during Step only and never retains or modifies it.
	IDs []uint64
}

// Hello returns an EventHello.
func Hello(version uint32) ReceiverEvent { return ReceiverEvent{Kind: EventHello, Version: version} }

// Received returns an EventReceived.
func Received(id uint64, size int64) ReceiverEvent {
	return ReceiverEvent{Kind: EventReceived, ID: id, Size: size}
}

// Discarded returns an EventDiscarded.
func Discarded(id uint64, size int64) ReceiverEvent {
	return ReceiverEvent{Kind: EventDiscarded, ID: id, Size: size}
}

// Stored returns an EventStored.
func Stored(ids []uint64) ReceiverEvent { return ReceiverEvent{Kind: EventStored, IDs: ids} }

// Close returns an EventClose.
func Close() ReceiverEvent { return ReceiverEvent{Kind: EventClose} }

func (e ReceiverEvent) String() string {
	switch e.Kind {
	case EventHello:
		return fmt.Sprintf("Hello{Version:%d}", e.Version)
	case EventReceived:
		return fmt.Sprintf("Received{ID:%d Size:%d}", e.ID, e.Size)
	case EventStored:
		return fmt.Sprintf("Stored{IDs:%v}", e.IDs)
	}
	return e.Kind.String()
}

// ReceiverActionKind says what a ReceiverAction asks the driver to do.
type ReceiverActionKind uint8

const (
	receiverActionUnknown ReceiverActionKind = iota
	// ActionWelcome: complete the handshake, granting the initial
	// cumulative credits MsgLimit and ByteLimit (the queue's capacity).
	ActionWelcome
	// ActionEnqueue: hand message ID (Size bytes) to the storage writer;
	// once it is durable (or found to be a duplicate) step Stored.
	ActionEnqueue
	// ActionAck: tell the agent the ids in Ranges are durably stored.
	// Exactly one per Stored event with any id, ranges sorted and minimal.
	ActionAck
	// ActionGrant: tell the agent the new cumulative credits. At most one
	// per event, and only when a limit grew.
	ActionGrant
	// ActionReject: tell the agent message ID was refused; Reason says
	// whether it may be resent on this stream (Reason.Retryable).
	ActionReject
	// ActionFail: protocol violation; send Reason to the agent and close
	// the stream. The Receiver is Closed.
	ActionFail
)

var receiverActionKindNames = [...]string{
	receiverActionUnknown: "Unknown",
	ActionWelcome:         "Welcome",
	ActionEnqueue:         "Enqueue",
	ActionAck:             "Ack",
	ActionGrant:           "Grant",
	ActionReject:          "Reject",
	ActionFail:            "Fail",
}

func (k ReceiverActionKind) String() string {
	if int(k) < len(receiverActionKindNames) {
		return receiverActionKindNames[k]
	}
	return fmt.Sprintf("ReceiverActionKind(%d)", uint8(k))
}

// ReceiverAction is one output of the Receiver.
type ReceiverAction struct {
	Kind      ReceiverActionKind
	ID        uint64 // Enqueue, Reject
	Size      int64  // Enqueue
	MsgLimit  uint64 // Welcome, Grant
	ByteLimit uint64 // Welcome, Grant
	// Ranges (Ack) is owned by the Receiver, valid until Advance.
	Ranges []Range
	Reason Reason // Reject, Fail
	// Version (Welcome) is the protocol version of the stream: the
	// highest both sides speak.
	Version uint32
}

func (a ReceiverAction) String() string {
	switch a.Kind {
	case ActionWelcome, ActionGrant:
		return fmt.Sprintf("%v{MsgLimit:%d ByteLimit:%d}", a.Kind, a.MsgLimit, a.ByteLimit)
	case ActionEnqueue:
		return fmt.Sprintf("Enqueue{ID:%d Size:%d}", a.ID, a.Size)
	case ActionAck:
		return fmt.Sprintf("Ack{Ranges:%v}", a.Ranges)
	case ActionReject:
		return fmt.Sprintf("Reject{ID:%d Reason:%v}", a.ID, a.Reason)
	case ActionFail:
		return fmt.Sprintf("Fail{Reason:%v}", a.Reason)
	}
	return a.Kind.String()
}

// Reason says why the Receiver rejected a message or failed a stream.
type Reason uint8

const (
	// ReasonNone is the zero Reason, carried by no action.
	ReasonNone Reason = iota
	// ReasonOverCredit: the message exceeded the stream's credits. The
	// agent resends it when credit allows (retryable).
	ReasonOverCredit
	// ReasonOversize: the message exceeds MaxMessageBytes; this sink will
	// never take it (not retryable).
	ReasonOversize
	// ReasonUnsupportedVersion: Hello carried a version outside
	// [MinVersion, MaxVersion].
	ReasonUnsupportedVersion
	// ReasonNoHello: a message arrived before Hello.
	ReasonNoHello
	// ReasonDuplicateHello: a second Hello arrived.
	ReasonDuplicateHello
)

var reasonNames = [...]string{
	ReasonNone:               "None",
	ReasonOverCredit:         "OverCredit",
	ReasonOversize:           "Oversize",
	ReasonUnsupportedVersion: "UnsupportedVersion",
	ReasonNoHello:            "NoHello",
	ReasonDuplicateHello:     "DuplicateHello",
}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Retryable reports whether a message rejected for r may be sent again on
// the same stream; it is the Retryable of the agent's Rejected event.
func (r Reason) Retryable() bool { return r == ReasonOverCredit }
