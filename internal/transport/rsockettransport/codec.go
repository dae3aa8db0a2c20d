package rsockettransport

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/fields"
	"github.com/sluicehq/sluice/internal/protocol"
)

// Frame types: the first byte of a frame's header.
const (
	typeHello byte = 1 + iota
	typeMessage
	typeDictionary
	typeWelcome
	typeAck
	typeCredit
	typeError
	typeReadStart
	typeReadMore
	typeCommit
	typeStored
	typeEndOfLog
)

// Credit flags: which optional parts follow.
const (
	creditHasCredits = 1 << iota
	creditHasStore
)

// Error flags.
const (
	errorRetryable = 1 << iota
	errorHasCredits
)

// ReadStart flags.
const (
	readFromCommitted = 1 << iota
	readFollow
)

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed frame")

// Encode appends the header of f (type byte, then its fields as uvarints,
// single bytes and uvarint-length-prefixed strings) to dst and returns it
// with f's body: the bulk bytes of a Message (Payload) or a Dictionary
// (Data), returned as they are, not copied, so that they travel as the
// RSocket payload's data while the header travels as its metadata. Other
// frames have no body, except Stored, whose records are appended after
// the header's end in the returned body (each uvarint-length-prefixed).
func Encode(dst []byte, f protocol.Frame) (header, body []byte, err error) {
	switch f := f.(type) {
	case *protocol.Hello:
		dst = append(dst, typeHello)
		dst = fields.AppendString(dst, f.AgentID)
		dst = binary.AppendUvarint(dst, uint64(f.Version))
		dst = binary.AppendUvarint(dst, uint64(len(f.Codecs)))
		for _, c := range f.Codecs {
			dst = append(dst, byte(c))
		}
		dst = appendIDs(dst, f.DictionaryIDs)
		dst = binary.AppendUvarint(dst, f.Watermark)
		if f.HasSentBelow { // optional: agents before it end at the watermark
			dst = binary.AppendUvarint(dst, f.SentBelow)
		}
		return dst, nil, nil
	case *protocol.Message:
		dst = append(dst, typeMessage)
		dst = binary.AppendUvarint(dst, f.ID)
		dst = binary.AppendUvarint(dst, uint64(f.Records))
		dst = append(dst, byte(f.Codec))
		dst = binary.AppendUvarint(dst, uint64(f.DictID))
		return dst, f.Payload, nil
	case *protocol.Dictionary:
		dst = append(dst, typeDictionary)
		dst = binary.AppendUvarint(dst, uint64(f.ID))
		return dst, f.Data, nil
	case *protocol.Welcome:
		dst = append(dst, typeWelcome)
		dst = binary.AppendUvarint(dst, uint64(f.Version))
		dst = binary.AppendUvarint(dst, f.Credits.Messages)
		dst = binary.AppendUvarint(dst, f.Credits.Bytes)
		dst = binary.AppendUvarint(dst, f.MaxMessageBytes)
		dst = appendIDs(dst, f.DictionaryIDs)
		dst = fields.AppendString(dst, f.SessionID)
		// The codec byte is there only when a codec is asked for, which a
		// sink does only of an agent whose Hello listed it: an older
		// agent, whose decoder refuses bytes after the session id, never
		// gets it.
		if f.Codec != protocol.CodecUnspecified {
			dst = append(dst, byte(f.Codec))
		}
		return dst, nil, nil
	case *protocol.Ack:
		dst = append(dst, typeAck)
		dst = binary.AppendUvarint(dst, uint64(len(f.Ranges)))
		for _, r := range f.Ranges {
			if r.Last < r.First {
				return nil, nil, fmt.Errorf("rsocket transport: Ack range %d..%d is reversed", r.First, r.Last)
			}
			// Ranges are short: the length, not the second id, is small.
			dst = binary.AppendUvarint(dst, r.First)
			dst = binary.AppendUvarint(dst, r.Last-r.First)
		}
		return dst, nil, nil
	case *protocol.Credit:
		dst = append(dst, typeCredit)
		var flags byte
		if f.Credits != nil {
			flags |= creditHasCredits
		}
		if f.Store != nil {
			flags |= creditHasStore
		}
		dst = append(dst, flags)
		if f.Credits != nil {
			dst = binary.AppendUvarint(dst, f.Credits.Messages)
			dst = binary.AppendUvarint(dst, f.Credits.Bytes)
		}
		dst = binary.AppendUvarint(dst, uint64(f.QueueCapacity))
		dst = appendIDs(dst, f.DictionaryIDs)
		if f.Store != nil {
			dst = fields.AppendBool(dst, f.Store.Available)
			dst = fields.AppendString(dst, f.Store.Detail)
		}
		return dst, nil, nil
	case *protocol.Error:
		dst = append(dst, typeError)
		dst = binary.AppendUvarint(dst, f.MessageID)
		dst = append(dst, byte(f.Code))
		dst = fields.AppendString(dst, f.Detail)
		var flags byte
		if f.Retryable {
			flags |= errorRetryable
		}
		if f.Credits != nil {
			flags |= errorHasCredits
		}
		dst = append(dst, flags)
		if f.Credits != nil {
			dst = binary.AppendUvarint(dst, f.Credits.Messages)
			dst = binary.AppendUvarint(dst, f.Credits.Bytes)
		}
		return dst, nil, nil
	case *protocol.ReadStart:
		dst = append(dst, typeReadStart)
		dst = binary.AppendUvarint(dst, f.From)
		var flags byte
		if f.FromCommitted {
			flags |= readFromCommitted
		}
		if f.Follow {
			flags |= readFollow
		}
		dst = append(dst, flags)
		dst = fields.AppendString(dst, f.Group)
		return dst, nil, nil
	case *protocol.ReadMore:
		dst = append(dst, typeReadMore)
		return binary.AppendUvarint(dst, uint64(f.N)), nil, nil
	case *protocol.Commit:
		dst = append(dst, typeCommit)
		return binary.AppendUvarint(dst, f.Offset), nil, nil
	case *protocol.Stored:
		dst = append(dst, typeStored)
		dst = binary.AppendUvarint(dst, f.Offset)
		dst = fields.AppendString(dst, f.AgentID)
		dst = binary.AppendUvarint(dst, f.MessageID)
		dst = binary.AppendUvarint(dst, uint64(len(f.Records)))
		n := len(dst)
		for _, r := range f.Records {
			dst = binary.AppendUvarint(dst, uint64(len(r)))
			dst = append(dst, r...)
		}
		return dst[:n], dst[n:], nil
	case *protocol.EndOfLog:
		dst = append(dst, typeEndOfLog)
		return binary.AppendUvarint(dst, f.Next), nil, nil
	}
	return nil, nil, fmt.Errorf("rsocket transport: cannot encode frame %s", protocol.Name(f))
}

// Decode parses a frame from its header and body. Byte fields of the
// result (Message.Payload, Dictionary.Data, Stored.Records) alias body;
// strings are copied. Any malformation is an error wrapping ErrMalformed,
// never a panic, and lists are bounded by the bytes present, so a hostile
// count cannot make it allocate more than the frame's size.
func Decode(header, body []byte) (protocol.Frame, error) {
	if len(header) == 0 {
		return nil, fmt.Errorf("%w: empty header", ErrMalformed)
	}
	d := fields.NewReader(header[1:])
	var f protocol.Frame
	hasBody := false
	switch header[0] {
	case typeHello:
		h := &protocol.Hello{AgentID: d.Text(), Version: d.Uint32()}
		if n := d.Count(); n > 0 {
			h.Codecs = make([]protocol.Codec, n)
			for i := range h.Codecs {
				h.Codecs[i] = protocol.Codec(d.Byte())
			}
		}
		h.DictionaryIDs = ids(&d)
		h.Watermark = d.Uvarint()
		if d.Err() == nil && len(d.Rest()) > 0 {
			h.SentBelow, h.HasSentBelow = d.Uvarint(), true
		}
		f = h
	case typeMessage:
		m := &protocol.Message{ID: d.Uvarint(), Records: d.Uint32(), Codec: protocol.Codec(d.Byte()), DictID: d.Uint32(), Payload: body}
		f, hasBody = m, true
	case typeDictionary:
		f, hasBody = &protocol.Dictionary{ID: d.Uint32(), Data: body}, true
	case typeWelcome:
		w := &protocol.Welcome{Version: d.Uint32()}
		w.Credits.Messages, w.Credits.Bytes = d.Uvarint(), d.Uvarint()
		w.MaxMessageBytes = d.Uvarint()
		w.DictionaryIDs = ids(&d)
		w.SessionID = d.Text()
		if d.Err() == nil && len(d.Rest()) > 0 {
			w.Codec = protocol.Codec(d.Byte())
		}
		f = w
	case typeAck:
		a := &protocol.Ack{}
		if n := d.Count(); n > 0 {
			a.Ranges = make([]protocol.IDRange, n)
			for i := range a.Ranges {
				first, span := d.Uvarint(), d.Uvarint()
				if first+span < first {
					d.Fail("Ack range overflows")
				}
				a.Ranges[i] = protocol.IDRange{First: first, Last: first + span}
			}
		}
		f = a
	case typeCredit:
		c := &protocol.Credit{}
		flags := d.Byte()
		if flags&^(creditHasCredits|creditHasStore) != 0 {
			d.Fail("unknown Credit flags")
		}
		if flags&creditHasCredits != 0 {
			c.Credits = &protocol.Credits{Messages: d.Uvarint(), Bytes: d.Uvarint()}
		}
		c.QueueCapacity = d.Uint32()
		c.DictionaryIDs = ids(&d)
		if flags&creditHasStore != 0 {
			c.Store = &protocol.StoreStatus{Available: d.Bool(), Detail: d.Text()}
		}
		f = c
	case typeError:
		e := &protocol.Error{MessageID: d.Uvarint(), Code: protocol.ErrorCode(d.Byte()), Detail: d.Text()}
		flags := d.Byte()
		if flags&^(errorRetryable|errorHasCredits) != 0 {
			d.Fail("unknown Error flags")
		}
		e.Retryable = flags&errorRetryable != 0
		if flags&errorHasCredits != 0 {
			e.Credits = &protocol.Credits{Messages: d.Uvarint(), Bytes: d.Uvarint()}
		}
		f = e
	case typeReadStart:
		r := &protocol.ReadStart{From: d.Uvarint()}
		flags := d.Byte()
		if flags&^(readFromCommitted|readFollow) != 0 {
			d.Fail("unknown ReadStart flags")
		}
		r.FromCommitted, r.Follow = flags&readFromCommitted != 0, flags&readFollow != 0
		r.Group = d.Text()
		f = r
	case typeReadMore:
		f = &protocol.ReadMore{N: d.Uint32()}
	case typeCommit:
		f = &protocol.Commit{Offset: d.Uvarint()}
	case typeStored:
		s := &protocol.Stored{Offset: d.Uvarint(), AgentID: d.Text(), MessageID: d.Uvarint()}
		n := d.Uvarint()
		if d.Err() == nil && n > uint64(len(body)) { // every record takes at least its length byte
			d.Fail("more records than bytes")
		}
		if d.Err() == nil && n > 0 {
			s.Records = make([][]byte, n)
			rd := fields.NewReader(body)
			for i := range s.Records {
				s.Records[i] = rd.Bytes()
			}
			if rd.Err() == nil && len(rd.Rest()) != 0 {
				rd.Fail("bytes after the last record")
			}
			if err := rd.Err(); err != nil {
				d.Fail(err.Error())
			}
		}
		f, hasBody = s, true
	case typeEndOfLog:
		f = &protocol.EndOfLog{Next: d.Uvarint()}
	default:
		return nil, fmt.Errorf("%w: unknown type %d", ErrMalformed, header[0])
	}
	if d.Err() == nil && len(d.Rest()) != 0 {
		d.Fail("bytes after the fields")
	}
	if d.Err() == nil && !hasBody && len(body) != 0 {
		d.Fail("a body on a frame that has none")
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, protocol.Name(f), err)
	}
	return f, nil
}

func appendIDs(dst []byte, ids []uint32) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		dst = binary.AppendUvarint(dst, uint64(id))
	}
	return dst
}

// ids reads what appendIDs wrote.
func ids(d *fields.Reader) []uint32 {
	n := d.Count()
	if n == 0 {
		return nil
	}
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = d.Uint32()
	}
	return ids
}
