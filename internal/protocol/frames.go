// Package protocol is sluice's delivery protocol without a transport: the
// frames an agent and a sink exchange on one session (Hello, Welcome,
// Message, Dictionary, Ack, Credit, Error) and on a consumer's read
// (ReadStart, ReadMore, Commit, Stored, EndOfLog), the error codes, and the
// one rule that says which errors are worth retrying.
//
// Transports adapt these frames: internal/transport/grpctransport maps them to the
// generated protobuf types (and is the only package that imports them),
// internal/transport/memconn passes them through channels for tests and
// simulations, and RSocket can carry them later. Code above the transport
// (the agent's driver, the sink's session, the client package) sees only
// this package.
//
// Frames are plain structs; a transport may reuse a frame's byte slices
// after Send returns, so a caller that keeps a payload past the next Recv
// copies it (see Conn).
package protocol

// Version is the protocol version this build speaks, carried in Hello and
// Welcome. It is defined here once; everything else refers to it.
const Version uint32 = 1

// Codec says how a Message's payload is encoded.
type Codec uint8

const (
	CodecUnspecified Codec = iota
	CodecPlain             // a batch of records, uncompressed
	CodecZstd              // the batch compressed with zstd
	CodecZstdDict          // the batch compressed with zstd and a dictionary
	CodecKafkaZstd         // a Kafka records section compressed with zstd (codec.KafkaZstd)
)

func (c Codec) String() string {
	switch c {
	case CodecPlain:
		return "plain"
	case CodecZstd:
		return "zstd"
	case CodecZstdDict:
		return "zstd-dict"
	case CodecKafkaZstd:
		return "kafka-zstd"
	}
	return "unspecified"
}

// Frame is one protocol frame: one of the pointer types below.
type Frame interface{ frameName() string }

// Name is a frame's type name, for logs and errors.
func Name(f Frame) string {
	if f == nil {
		return "nil"
	}
	return f.frameName()
}

// ---- agent → sink (Send session) ----

// Hello opens a session: the agent's identity, what it can encode, which
// dictionaries it has, and its acknowledged watermark (every id at or below
// it is durable at a sink, so the sink may forget it).
type Hello struct {
	AgentID       string
	Version       uint32
	Codecs        []Codec
	DictionaryIDs []uint32
	Watermark     uint64
	// SentBelow, when HasSentBelow, bounds the ids the agent's spool has
	// sent under this agent id: every one is below it (the spool persists
	// it ahead of what it sends). A sink holding an id at or above it
	// under the agent id refuses the session: another spool numbered that
	// id. Agents before it send none.
	SentBelow    uint64
	HasSentBelow bool
}

// Message is one batch of records under its delivery id.
type Message struct {
	ID      uint64
	Records uint32
	Codec   Codec
	DictID  uint32 // with CodecZstdDict
	Payload []byte
}

// Dictionary uploads a zstd dictionary before messages that use it.
type Dictionary struct {
	ID   uint32
	Data []byte
}

// Malformed is a request a transport received but could not turn into a
// frame: an unknown request version, or no payload. It is not an error of
// Recv because the sink refuses such a message alone (an Error frame for
// MessageID) and the session goes on; only as the first request, or as a
// dictionary upload, does it end the session. Nothing sends it.
type Malformed struct {
	MessageID uint64
	Version   uint32 // the request's version
	Payload   string // what the request carried ("plain", "dictionary", "no payload", ...)
	Detail    string
}

// ---- sink → agent (Send session) ----

// Credits are a window in messages and bytes: how much the sender may have
// unacknowledged.
type Credits struct {
	Messages uint64
	Bytes    uint64
}

// Welcome answers Hello.
type Welcome struct {
	Version         uint32
	Credits         Credits
	MaxMessageBytes uint64
	DictionaryIDs   []uint32 // dictionaries the sink already has
	SessionID       string
	// Codec is the body the sink asks the agent to seal its messages in
	// from now on, or CodecUnspecified for the agent's own choice. A sink
	// sets it only to a codec the Hello listed: CodecKafkaZstd when its
	// store is a Kafka topic that takes the agent's compressed records as
	// they are. Messages spooled before keep their codec.
	Codec Codec
}

// IDRange is an inclusive range of message ids.
type IDRange struct{ First, Last uint64 }

// Ack says the messages in Ranges are durable at the sink.
type Ack struct {
	Ranges []IDRange
}

// Credit updates the window, the queue capacity, the dictionaries known, or
// reports the store's state; zero fields carry nothing.
type Credit struct {
	Credits       *Credits
	QueueCapacity uint32
	DictionaryIDs []uint32
	Store         *StoreStatus
}

// StoreStatus reports whether the sink's store accepts writes.
type StoreStatus struct {
	Available bool
	Detail    string
}

// Error refuses one message; the session goes on.
type Error struct {
	MessageID uint64
	Code      ErrorCode
	Detail    string
	Retryable bool // the sender may resend the same message later
	// Credits, if set, is the window after this refusal (the credit the
	// refused message took is handed back): a transport may carry it with
	// the Error, as gRPC does in one ServiceMessage; a receiver treats it as
	// a Credit frame that came just before the Error.
	Credits *Credits
}

// ---- consumer ↔ sink (Read session) ----

// ReadStart opens a read.
type ReadStart struct {
	From          uint64 // position to start at
	FromCommitted bool   // start at Group's committed position instead
	Follow        bool   // wait for new messages at the end instead of ending
	Group         string
}

// ReadMore grants the sink N more messages (request-n flow control).
type ReadMore struct{ N uint32 }

// Commit stores Group's position.
type Commit struct{ Offset uint64 }

// Stored is one stored message, as read back.
type Stored struct {
	Offset    uint64
	AgentID   string
	MessageID uint64
	Records   [][]byte
}

// EndOfLog ends a read that does not follow; Next is where to resume.
type EndOfLog struct{ Next uint64 }

func (*Hello) frameName() string      { return "Hello" }
func (*Message) frameName() string    { return "Message" }
func (*Dictionary) frameName() string { return "Dictionary" }
func (*Malformed) frameName() string  { return "Malformed" }
func (*Welcome) frameName() string    { return "Welcome" }
func (*Ack) frameName() string        { return "Ack" }
func (*Credit) frameName() string     { return "Credit" }
func (*Error) frameName() string      { return "Error" }
func (*ReadStart) frameName() string  { return "ReadStart" }
func (*ReadMore) frameName() string   { return "ReadMore" }
func (*Commit) frameName() string     { return "Commit" }
func (*Stored) frameName() string     { return "Stored" }
func (*EndOfLog) frameName() string   { return "EndOfLog" }
