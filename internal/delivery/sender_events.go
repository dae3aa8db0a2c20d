package delivery

import (
	"fmt"
	"time"
)

// EventKind says which of the Sender's inputs an Event is.
type EventKind uint8

const (
	eventUnknown EventKind = iota
	// EventSpooled: message ID of Size bytes is durably in the spool and
	// queued for sending. IDs must arrive in order: each is one more than
	// the previous, and the first is SenderConfig.Watermark.
	EventSpooled
	// EventAcked: the sink durably stored the ids in Ranges.
	EventAcked
	// EventTimeout: the timer armed by ArmTimer{ID, Attempt} fired.
	EventTimeout
	// EventCredits: the sink raised the cumulative limits of the current
	// stream to MsgLimit and ByteLimit.
	EventCredits
	// EventConnected: a stream is established and its handshake is done;
	// MsgLimit and ByteLimit are the stream's initial cumulative credits.
	EventConnected
	// EventDisconnected: the stream broke, or a connection attempt failed.
	// Jitter, in [0, 1), randomises the reconnect back-off.
	EventDisconnected
	// EventRejected: the sink refused message ID on the current stream.
	EventRejected
	// EventTick: time passed. Every deadline at or before Now fires:
	// resend timers (as Timeout would), the reconnect back-off (Dial) and
	// the progress deadline (Stalled). See NextDeadline.
	EventTick
	// EventSetAside: the driver copied parked message ID out of the spool
	// durably (a dead letter, kept for an operator), because the spool
	// needs the room the parked message holds: every segment from it on
	// stays on disk while it holds the watermark. The message is settled
	// as if acknowledged, but not counted as delivered. Only a parked
	// message is set aside; for any other id the event is stale.
	EventSetAside
)

var eventKindNames = [...]string{
	eventUnknown:      "Unknown",
	EventSpooled:      "Spooled",
	EventAcked:        "Acked",
	EventTimeout:      "Timeout",
	EventCredits:      "Credits",
	EventConnected:    "Connected",
	EventDisconnected: "Disconnected",
	EventRejected:     "Rejected",
	EventTick:         "Tick",
	EventSetAside:     "SetAside",
}

func (k EventKind) String() string {
	if int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one input to Sender.Step. It is a tagged struct rather than an
// interface so that stepping never allocates; Kind says which fields mean
// something, and the constructors below set exactly those.
//
// Now is the driver's monotonic clock in nanoseconds when the event happened
// (time.Since of a fixed origin works). It is the Sender's only notion of
// time: ArmTimer deadlines are on the same clock. A Now smaller than one
// already seen is taken as the latest Now seen, so that events stamped by
// different goroutines may reach Step slightly out of order.
type Event struct {
	Kind    EventKind
	ID      uint64  // Spooled, Timeout, Rejected, SetAside
	Size    int64   // Spooled: body size in bytes; >= 0
	Attempt uint32  // Timeout: the Attempt of the ArmTimer that fired
	Ranges  []Range // Acked; read during Step only, never retained
	// MsgLimit and ByteLimit are cumulative credits (Connected, Credits):
	// the Sender may send while the count of sends on this stream is below
	// MsgLimit and their total size stays within ByteLimit.
	MsgLimit  uint64
	ByteLimit uint64
	Jitter    float64 // Disconnected: uniform in [0, 1)
	// Replaced (Disconnected): the sink ended the stream because a newer
	// session of this agent id replaced it; the reconnect waits
	// ReconnectMax (see Replaced).
	Replaced  bool
	Retryable bool // Rejected: false if this sink will never take the message
	Now       int64
}

// Spooled returns an EventSpooled.
func Spooled(id uint64, size int64, now int64) Event {
	return Event{Kind: EventSpooled, ID: id, Size: size, Now: now}
}

// Acked returns an EventAcked. The Sender does not retain ranges.
func Acked(ranges []Range, now int64) Event {
	return Event{Kind: EventAcked, Ranges: ranges, Now: now}
}

// Timeout returns an EventTimeout for the timer ArmTimer{id, attempt}.
func Timeout(id uint64, attempt uint32, now int64) Event {
	return Event{Kind: EventTimeout, ID: id, Attempt: attempt, Now: now}
}

// Credits returns an EventCredits.
func Credits(msgLimit, byteLimit uint64, now int64) Event {
	return Event{Kind: EventCredits, MsgLimit: msgLimit, ByteLimit: byteLimit, Now: now}
}

// Connected returns an EventConnected carrying the stream's initial credits.
func Connected(msgLimit, byteLimit uint64, now int64) Event {
	return Event{Kind: EventConnected, MsgLimit: msgLimit, ByteLimit: byteLimit, Now: now}
}

// Disconnected returns an EventDisconnected; jitter must be in [0, 1).
func Disconnected(jitter float64, now int64) Event {
	return Event{Kind: EventDisconnected, Jitter: jitter, Now: now}
}

// Replaced returns an EventDisconnected for a stream the sink ended
// because a newer session of the same agent id replaced it (issue 23):
// the reconnect waits ReconnectMax (±20%), whatever the back-off was, so
// two agents sharing an id alternate about once per ReconnectMax instead
// of replacing each other at ReconnectMin.
func Replaced(jitter float64, now int64) Event {
	return Event{Kind: EventDisconnected, Jitter: jitter, Replaced: true, Now: now}
}

// Rejected returns an EventRejected.
func Rejected(id uint64, retryable bool, now int64) Event {
	return Event{Kind: EventRejected, ID: id, Retryable: retryable, Now: now}
}

// SetAside returns an EventSetAside: parked message id is durably copied
// out of the spool.
func SetAside(id uint64, now int64) Event {
	return Event{Kind: EventSetAside, ID: id, Now: now}
}

// Tick returns an EventTick.
func Tick(now int64) Event { return Event{Kind: EventTick, Now: now} }

func (e Event) String() string {
	switch e.Kind {
	case EventSpooled:
		return fmt.Sprintf("Spooled{ID:%d Size:%d}", e.ID, e.Size)
	case EventAcked:
		return fmt.Sprintf("Acked{Ranges:%v}", e.Ranges)
	case EventTimeout:
		return fmt.Sprintf("Timeout{ID:%d Attempt:%d}", e.ID, e.Attempt)
	case EventCredits, EventConnected:
		return fmt.Sprintf("%v{MsgLimit:%d ByteLimit:%d}", e.Kind, e.MsgLimit, e.ByteLimit)
	case EventDisconnected:
		return fmt.Sprintf("Disconnected{Jitter:%g}", e.Jitter)
	case EventRejected:
		return fmt.Sprintf("Rejected{ID:%d Retryable:%t}", e.ID, e.Retryable)
	case EventSetAside:
		return fmt.Sprintf("SetAside{ID:%d}", e.ID)
	}
	return e.Kind.String()
}

// ActionKind says what an Action asks the driver to do.
type ActionKind uint8

const (
	actionUnknown ActionKind = iota
	// ActionSend: read message ID (Size bytes) from the spool and write it
	// to the current stream. Always followed by its ArmTimer.
	ActionSend
	// ActionArmTimer: at At (the Event.Now clock), step
	// Timeout(ID, Attempt, now). Attempt is 1 for the first send of ID and
	// grows by one per resend, so a late fire of an older timer is
	// recognised as stale and ignored.
	ActionArmTimer
	// ActionCancelTimer: the timer ArmTimer{ID, Attempt} is no longer
	// needed. Optional: a driver may let it fire, the Sender ignores it.
	ActionCancelTimer
	// ActionCancelAllTimers: no timer armed so far is needed (the stream
	// broke). Like CancelTimer, optional. One action instead of one
	// CancelTimer per message in flight keeps a disconnect O(1) for
	// drivers that keep timers in a single heap or wheel.
	ActionCancelAllTimers
	// ActionMarkAcked: every id below Watermark is acknowledged. Persist
	// the watermark (a restarted agent resumes from it), then delete spool
	// segments below it. At most one per Step, after the acks that caused
	// it and before any Send of the same Step.
	ActionMarkAcked
	// ActionReconnect: the stream is gone (close it if it is not); the
	// Sender will emit Dial After this long. Exactly one per Disconnected
	// event. A driver that uses Tick only closes the stream here; one that
	// keeps its own timers may dial After this long instead of on Dial.
	ActionReconnect
	// ActionDial: dial the sink now. Emitted by Tick once the back-off of
	// the last Reconnect has passed, at most once per Disconnected.
	ActionDial
	// ActionStalled: messages have been in flight, or waited for credit,
	// on the current stream for SenderConfig.ProgressTimeout with no ack. The driver closes the
	// stream and steps Disconnected, as for any broken stream. At most once
	// per stream.
	ActionStalled
)

var actionKindNames = [...]string{
	actionUnknown:         "Unknown",
	ActionSend:            "Send",
	ActionArmTimer:        "ArmTimer",
	ActionCancelTimer:     "CancelTimer",
	ActionCancelAllTimers: "CancelAllTimers",
	ActionMarkAcked:       "MarkAcked",
	ActionReconnect:       "Reconnect",
	ActionDial:            "Dial",
	ActionStalled:         "Stalled",
}

func (k ActionKind) String() string {
	if int(k) < len(actionKindNames) {
		return actionKindNames[k]
	}
	return fmt.Sprintf("ActionKind(%d)", uint8(k))
}

// Action is one output of the Sender, a tagged struct like Event. It holds
// no references, so Actions compare with ==.
type Action struct {
	Kind      ActionKind
	ID        uint64        // Send, ArmTimer, CancelTimer
	Size      int64         // Send
	Attempt   uint32        // ArmTimer, CancelTimer
	At        int64         // ArmTimer: absolute deadline on the Event.Now clock
	Watermark uint64        // MarkAcked
	After     time.Duration // Reconnect
}

func (a Action) String() string {
	switch a.Kind {
	case ActionSend:
		return fmt.Sprintf("Send{ID:%d Size:%d}", a.ID, a.Size)
	case ActionArmTimer:
		return fmt.Sprintf("ArmTimer{ID:%d Attempt:%d At:%d}", a.ID, a.Attempt, a.At)
	case ActionCancelTimer:
		return fmt.Sprintf("CancelTimer{ID:%d Attempt:%d}", a.ID, a.Attempt)
	case ActionMarkAcked:
		return fmt.Sprintf("MarkAcked{Watermark:%d}", a.Watermark)
	case ActionReconnect:
		return fmt.Sprintf("Reconnect{After:%v}", a.After)
	}
	return a.Kind.String()
}
