package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/store"
)

// recvLoop reads the session's frames, validates them and steps the
// Receiver with them (session.step): the receiver side of a session (see
// session).
func (st *session) recvLoop(ctx context.Context) {
	dec := codec.NewDecoder(int(st.s.cfg.MaxMessageBytes))
	for {
		f, err := st.conn.Recv()
		if err != nil {
			st.stop(err)
			return
		}
		var ev inbound
		switch f := f.(type) {
		case *protocol.Hello:
			ev = inbound{kind: inHello, version: f.Version}
		case *protocol.Dictionary:
			ev = st.upload(f, dec)
		case *protocol.Message:
			ev = st.check(f, dec)
		case *protocol.Malformed:
			ev = st.malformed(f)
		default:
			ev = inbound{kind: inFatal, err: protocol.Errorf(protocol.StatusInvalid, "a %s frame on a Send session", protocol.Name(f))}
		}
		if !st.step(ctx, &ev) {
			return
		}
	}
}

// malformed refuses a request the transport could not read: that message
// alone, or the session if it was a dictionary upload (messages using the
// dictionary could never be decoded).
func (st *session) malformed(m *protocol.Malformed) inbound {
	if m.Payload == "dictionary" {
		return inbound{kind: inFatal, err: protocol.Errorf(protocol.StatusInvalid, "dictionary upload: %s", m.Detail)}
	}
	st.s.m.receivedMsgs.Inc()
	reason := reasonNoPayload
	if m.Version != protocol.Version {
		reason = reasonVersion
	}
	return inbound{kind: inInvalid, id: m.MessageID, rej: rejection{code: protocol.CodeBadPayload, reason: reason, detail: m.Detail}}
}

// upload validates and durably stores an uploaded dictionary. A bad
// upload is a protocol violation that ends the session: messages using
// the dictionary could never be decoded.
func (st *session) upload(d *protocol.Dictionary, dec *codec.Decoder) inbound {
	fatal := func(s protocol.Status, format string, args ...any) inbound {
		return inbound{kind: inFatal, err: protocol.Errorf(s, format, args...)}
	}
	if d.ID == 0 {
		return fatal(protocol.StatusInvalid, "dictionary upload with id 0")
	}
	dict, err := codec.ParseDictionary(d.Data)
	if err != nil {
		return fatal(protocol.StatusInvalid, "dictionary %d: %v", d.ID, err)
	}
	if dict.ID != d.ID {
		return fatal(protocol.StatusInvalid, "dictionary uploaded as id %d has id %d in its zstd header", d.ID, dict.ID)
	}
	if !st.ownPayloads {
		dict.Data = bytes.Clone(dict.Data)
	}
	if err := st.s.dicts.Put(st.agent, dict); err != nil {
		if errors.Is(err, store.ErrDictConflict) || errors.Is(err, store.ErrTooManyDicts) {
			return fatal(protocol.StatusInvalid, "dictionary %d: %v", dict.ID, err)
		}
		st.log.Error("sink: cannot store dictionary", "dictionary_id", dict.ID, "err", err)
		return fatal(protocol.StatusUnavailable, "dictionary %d could not be stored", dict.ID)
	}
	if err := dec.AddDictionary(dict); err != nil {
		return fatal(protocol.StatusInvalid, "dictionary %d: %v", dict.ID, err)
	}
	st.s.m.dictUploads.Inc()
	st.log.Info("sink: dictionary stored", "dictionary_id", dict.ID, "bytes", len(dict.Data))
	return inbound{kind: inDictionary, dictID: dict.ID}
}

// decodeBufs recycles the buffers batches are decompressed into for
// validation (and for reads), across sessions: validation needs the
// records only while it counts them, so the decompressed copy is never
// kept.
var decodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// check validates one batch: size as sent, decompression (with the
// agent's dictionary), batch format and record count. Decompressing every
// compressed batch costs CPU, but it is the only way to be sure the store
// never holds a message its readers cannot decode; what is stored is the
// payload as received, compressed or not.
func (st *session) check(f *protocol.Message, dec *codec.Decoder) inbound {
	limit := st.s.cfg.MaxMessageBytes
	body, kind, dictID := f.Payload, codec.Kind(f.Codec), f.DictID
	id, size := f.ID, int64(len(body))
	st.s.m.receivedMsgs.Inc()
	st.s.m.receivedBytes.Add(float64(size))
	reject := func(code protocol.ErrorCode, reason string, retryable bool, format string, args ...any) inbound {
		return inbound{kind: inInvalid, id: id, size: size, rej: rejection{
			code: code, reason: reason, retryable: retryable, detail: fmt.Sprintf(format, args...)}}
	}
	const (
		badPayload = protocol.CodeBadPayload
		oversize   = protocol.CodeOversize
		unknown    = protocol.CodeUnknownDictionary
	)
	switch {
	case kind != codec.Plain && kind != codec.Zstd && kind != codec.ZstdDict && kind != codec.KafkaZstd:
		return reject(badPayload, reasonNoPayload, false, "Request without a payload")
	case size > limit:
		return reject(oversize, reasonOversize, false, "payload of %d bytes exceeds max_message_bytes %d", size, limit)
	case kind == codec.ZstdDict && dictID == 0:
		return reject(badPayload, reasonCorrupt, false, "zstd_dict payload with dictionary_id 0")
	case kind == codec.KafkaZstd && dictID != 0:
		return reject(badPayload, reasonCorrupt, false, "kafka_zstd payload with dictionary_id %d: it takes none", dictID)
	}
	if kind == codec.ZstdDict && !dec.HasDictionary(dictID) {
		dict, ok, err := st.s.dicts.Get(st.agent, dictID)
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
	if kind == codec.KafkaZstd {
		return st.checkKafkaRecords(f, body, decoded, reject)
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
	if uint64(n) != uint64(f.Records) {
		return reject(badPayload, reasonCount, false, "record_count %d, but the batch holds %d records", f.Records, n)
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
	if !st.ownPayloads {
		// The transport may reuse the payload's memory on the next Recv;
		// the writer needs it until the message is stored.
		body = bytes.Clone(body)
	}
	return inbound{kind: inMessage, id: id, size: size, msg: store.Message{
		Agent: st.agent, AgentB: st.agentB, ID: id, Codec: kind, DictID: dictID, Records: f.Records, Body: body, Acks: st.acks,
	}}
}

// checkKafkaRecords validates a codec.KafkaZstd message whose payload
// decompressed to decoded: a Kafka records section that must be exactly
// the one kafkarec.AppendRecords builds for this agent's message f.ID
// (kafkarec.Records). This binds the records to the session's identity:
// every record's key and sluice header name the agent the credentials
// proved and this message id, or the message is refused whole; otherwise
// an agent could write records in another agent's name, which every
// sink's tailer would index as that agent's stored messages. A store that
// takes such bodies (store.TakesKafkaRecords) gets the payload as it came;
// for any other the message is converted here into what the agent would
// have sent with codec.Zstd.
func (st *session) checkKafkaRecords(f *protocol.Message, body, decoded []byte,
	reject func(protocol.ErrorCode, string, bool, string, ...any) inbound) inbound {
	id, size := f.ID, int64(len(body))
	switch {
	case f.Records == 0:
		return reject(protocol.CodeBadPayload, reasonEmpty, false, "empty batch: a message holds at least one record")
	case f.Records > batch.MaxRecords:
		return reject(protocol.CodeBadPayload, reasonCount, false, "record_count %d: a message holds at most %d records", f.Records, batch.MaxRecords)
	}
	var conv *kafkaConverter
	if !st.storeTakesKafka {
		if st.kafkaConv == nil {
			st.kafkaConv = &kafkaConverter{enc: codec.NewEncoder(codec.LevelDefault)}
		}
		conv = st.kafkaConv
		conv.b.Reset()
	}
	var b *batch.Builder
	if conv != nil {
		b = &conv.b
	}
	longest, err := kafkaRecords(decoded, st.agentB, id, f.Records, b)
	if err != nil {
		return reject(protocol.CodeBadPayload, reasonKafkaRecords, false, "%v", err)
	}
	if rl := st.s.recordLimit(); rl > 0 && longest > rl {
		return reject(protocol.CodeOversize, reasonOversize, false, "a record of %d bytes is larger than the Kafka topic takes (%d bytes; its max.message.bytes less overhead)", longest, rl)
	}
	st.s.m.decodedBytes.Add(float64(len(decoded)))
	kind := codec.KafkaZstd
	switch {
	case conv != nil:
		if body, err = conv.seal(); err != nil {
			st.log.Error("sink: cannot convert a kafka_zstd message", "message_id", id, "err", err)
			return inbound{kind: inFatal, err: protocol.Errorf(protocol.StatusInternal, "message %d could not be converted for the store", id)}
		}
		kind = codec.Zstd
	case !st.ownPayloads:
		// The transport may reuse the payload's memory on the next Recv.
		body = bytes.Clone(body)
	}
	return inbound{kind: inMessage, id: id, size: size, msg: store.Message{
		Agent: st.agent, AgentB: st.agentB, ID: id, Codec: kind, Records: f.Records, Body: body, Acks: st.acks,
	}}
}

// kafkaRecords checks that section is the records section of count records
// of agent's message (kafkarec.Records) and returns the longest record
// value; when b is not nil it also adds every value to b, in order. Its
// error says which record is wrong and how, for the agent.
func kafkaRecords(section, agent []byte, message uint64, count uint32, b *batch.Builder) (longest int, err error) {
	err = kafkarec.Records(section, agent, message, int(count), func(_ int, value []byte) error {
		longest = max(longest, len(value))
		if b != nil {
			return b.Add(value)
		}
		return nil
	})
	var me *kafkarec.MalformedError
	switch {
	case errors.As(err, &me) && me.Record >= 0:
		return 0, fmt.Errorf("not the Kafka records section of message %d of this agent: record %d of %d (byte %d): %s",
			message, me.Record, count, me.Offset, me.Reason)
	case errors.As(err, &me):
		return 0, fmt.Errorf("not the Kafka records section of message %d of this agent: byte %d: %s", message, me.Offset, me.Reason)
	case err != nil:
		return 0, fmt.Errorf("kafka_zstd records of message %d: %w", message, err)
	}
	return longest, nil
}

// kafkaConverter turns the records of a codec.KafkaZstd message into a
// zstd batch (internal/batch's body, codec.Zstd) for a store that does
// not take Kafka records sections. One per session, used by its receiver
// only: the message is stored exactly as if its agent had sent it with
// codec.Zstd, and reads back the same way.
type kafkaConverter struct {
	b   batch.Builder
	enc *codec.Encoder
}

// convertKeep bounds the batch buffer a converter keeps between messages,
// as decodeBufs does for decompression buffers.
const convertKeep = 8 << 20

// seal compresses the batch built and returns it in memory of its own
// (the message owns its body until it is stored).
func (c *kafkaConverter) seal() ([]byte, error) {
	out, err := c.enc.Encode(nil, c.b.Bytes(), codec.Zstd, 0)
	if c.b.Cap() > convertKeep {
		c.b = batch.Builder{}
	}
	return out, err
}
