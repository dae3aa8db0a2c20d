package conn

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// Interaction is the kind of a stream.
type Interaction uint8

const (
	RequestResponse Interaction = iota + 1
	FireAndForget
	RequestStream
	RequestChannel
)

var interactionNames = [...]string{"", "request-response", "fire-and-forget", "request-stream", "request-channel"}

func (i Interaction) String() string {
	if int(i) < len(interactionNames) && i > 0 {
		return interactionNames[i]
	}
	return fmt.Sprintf("Interaction(%d)", uint8(i))
}

func interactionOf(t frame.Type) Interaction {
	switch t {
	case frame.TypeRequestResponse:
		return RequestResponse
	case frame.TypeRequestFNF:
		return FireAndForget
	case frame.TypeRequestStream:
		return RequestStream
	case frame.TypeRequestChannel:
		return RequestChannel
	}
	return 0
}

func (i Interaction) frameType() frame.Type {
	switch i {
	case RequestResponse:
		return frame.TypeRequestResponse
	case FireAndForget:
		return frame.TypeRequestFNF
	case RequestStream:
		return frame.TypeRequestStream
	}
	return frame.TypeRequestChannel
}

// EventKind says what happened.
type EventKind uint8

const (
	// EventSetup (server): the client's SETUP was accepted. Setup holds it.
	// The application may still refuse with Close(ErrorCodeRejectedSetup).
	EventSetup EventKind = iota + 1
	// EventRequest: the peer opened stream StreamID: Interaction, the
	// request's Metadata and Data, N its initial request N (stream,
	// channel), Complete for a channel whose requester half is already
	// complete. For fire-and-forget nothing more will happen on the stream.
	EventRequest
	// EventPayload: a PAYLOAD on StreamID: Next (an element in Metadata,
	// Data), Complete (the peer will send no more).
	EventPayload
	// EventRequestN: the peer granted N more credits on StreamID, or (N 0)
	// Bytes more byte credits (byte-credits extension).
	EventRequestN
	// EventCancel: the peer cancelled StreamID. For a responder the stream
	// is over; for the requester of a channel only its sending half is.
	EventCancel
	// EventError: StreamID ended with Code and Message, sent by the peer,
	// or decided here (the peer broke flow control, a payload too large,
	// the connection closed); Local tells which.
	EventError
	// EventMetadataPush: a METADATA_PUSH with Metadata.
	EventMetadataPush
	// EventLease: the peer granted a lease: N requests during TTL from now.
	EventLease
	// EventClosed: the connection is closed (Err says why: *PeerError,
	// *LocalError, or the transport error). It is the last event; every
	// stream got its EventError before it.
	EventClosed
	// EventReconnect: the transport was lost and the resumable session is
	// kept (Err says why): a client dials again and calls Reconnected; a
	// server waits for a RESUME with the token (AcceptResume). Without
	// resume by Config.ResumeSessionLifetime, EventClosed follows.
	EventReconnect
	// EventResumed: RESUME_OK was received (client) or sent (server); the
	// frames the peer lacked were replayed.
	EventResumed
)

var eventNames = [...]string{"", "Setup", "Request", "Payload", "RequestN", "Cancel", "Error", "MetadataPush", "Lease", "Closed", "Reconnect", "Resumed"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && k > 0 {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one thing the application must learn. Slices are valid until
// Advance.
type Event struct {
	Kind        EventKind
	StreamID    uint32
	Interaction Interaction
	Metadata    []byte // nil: no metadata
	Data        []byte
	N           uint32
	Bytes       uint32 // EventRequestN: byte credits granted (byte-credits extension)
	Next        bool
	Complete    bool
	Code        frame.ErrorCode
	Message     string
	Local       bool          // EventError decided by this end, not sent by the peer
	TTL         time.Duration // EventLease
	Setup       *SetupInfo    // EventSetup
	Err         error         // EventClosed
	// Owned (EventRequest, EventPayload): Metadata and Data were
	// allocated for this event alone (a payload reassembled from
	// fragments), so they stay valid after Advance and this end never
	// touches them again: the application may keep them without a copy.
	Owned bool
}

// SetupInfo is the accepted SETUP, as the server saw it.
type SetupInfo struct {
	MajorVersion, MinorVersion uint16
	KeepaliveInterval          uint32 // ms
	MaxLifetime                uint32 // ms
	MetadataMIME, DataMIME     string
	Metadata, Data             []byte
	Lease                      bool
	ResumeToken                []byte // nil: the client does not resume
}

func (e Event) String() string {
	s := fmt.Sprintf("%s stream=%d", e.Kind, e.StreamID)
	switch e.Kind {
	case EventRequest:
		s += fmt.Sprintf(" %s n=%d md=%q data=%q complete=%v", e.Interaction, e.N, e.Metadata, e.Data, e.Complete)
	case EventPayload:
		s += fmt.Sprintf(" next=%v complete=%v md=%q data=%q", e.Next, e.Complete, e.Metadata, e.Data)
	case EventRequestN:
		s += fmt.Sprintf(" n=%d bytes=%d", e.N, e.Bytes)
	case EventError:
		s += fmt.Sprintf(" %s %q local=%v", e.Code, e.Message, e.Local)
	case EventClosed:
		s += fmt.Sprintf(" err=%v", e.Err)
	}
	return s
}

// Ready is what the driver must do: write Out (frames, each preceded by
// its 24-bit length; see NextFrame for WebSocket) and deliver Events.
type Ready struct {
	Out    []byte
	Events []Event
	// Lent lists the data SendPayloadLent did not copy into Out, in
	// order: each goes into the output right after Out[:At], so the bytes
	// to send are Out[:Lent[0].At], Lent[0].Data, Out[Lent[0].At:...] and
	// so on. Empty unless the driver called SendPayloadLent.
	Lent []Lent
}

// Lent is a payload's data that belongs in the output at At (an offset in
// Ready.Out) but was not copied there: the driver writes it from the
// caller's memory, which the caller keeps unchanged until then.
type Lent struct {
	At   int
	Data []byte
}

// NextFrame splits the first length-prefixed frame off out, for drivers
// (WebSocket) that send frames without the prefix. ok is false when out
// holds no complete frame.
func NextFrame(out []byte) (f, rest []byte, ok bool) {
	if len(out) < frame.LengthPrefixSize {
		return nil, out, false
	}
	n := int(out[0])<<16 | int(out[1])<<8 | int(out[2])
	if len(out)-frame.LengthPrefixSize < n {
		return nil, out, false
	}
	end := frame.LengthPrefixSize + n
	return out[frame.LengthPrefixSize:end:end], out[end:], true
}
