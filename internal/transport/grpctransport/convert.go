// Package grpctransport carries the delivery protocol (internal/protocol) over gRPC:
// the Sink service of api/sluice/v1. It is the only package that imports
// the generated protobuf code; convert.go maps frames to messages and back,
// and the client and server sides adapt gRPC streams to protocol.Conn.
package grpctransport

import (
	"fmt"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/protocol"
)

// RequestFromFrame fills req (reused between calls to save allocations)
// from an agent → sink frame. The payload bytes are referenced, not
// copied: gRPC marshals them before Send returns.
func RequestFromFrame(req *sluicev1.Request, f protocol.Frame) error {
	req.Version = protocol.Version
	req.MessageId, req.RecordCount = 0, 0
	switch f := f.(type) {
	case *protocol.Hello:
		codecs := make([]sluicev1.Codec, len(f.Codecs))
		for i, c := range f.Codecs {
			codecs[i] = sluicev1.Codec(c)
		}
		h := &sluicev1.Hello{
			AgentId: f.AgentID, ProtocolVersion: f.Version, Codecs: codecs,
			DictionaryIds: f.DictionaryIDs, Watermark: f.Watermark,
		}
		if f.HasSentBelow {
			h.SentBelow = &f.SentBelow
		}
		req.Payload = &sluicev1.Request_Hello{Hello: h}
	case *protocol.Message:
		req.MessageId, req.RecordCount = f.ID, f.Records
		switch f.Codec {
		case protocol.CodecPlain:
			req.Payload = &sluicev1.Request_Plain{Plain: f.Payload}
		case protocol.CodecZstd:
			req.Payload = &sluicev1.Request_Zstd{Zstd: f.Payload}
		case protocol.CodecZstdDict:
			req.Payload = &sluicev1.Request_ZstdDict{ZstdDict: &sluicev1.ZstdDict{DictionaryId: f.DictID, Data: f.Payload}}
		case protocol.CodecKafkaZstd:
			req.Payload = &sluicev1.Request_KafkaZstd{KafkaZstd: f.Payload}
		default:
			return fmt.Errorf("message %d: codec %v cannot be sent", f.ID, f.Codec)
		}
	case *protocol.Dictionary:
		req.Payload = &sluicev1.Request_Dictionary{Dictionary: &sluicev1.Dictionary{Id: f.ID, Data: f.Data}}
	default:
		return fmt.Errorf("a %s frame is not sent by an agent", protocol.Name(f))
	}
	return nil
}

// FrameFromRequest is the frame a Request carries. A Request with a
// version other than protocol.Version, or with no payload, is a
// *protocol.Malformed: the sink refuses that one message (or ends the
// session, if it came first).
func FrameFromRequest(req *sluicev1.Request) (protocol.Frame, error) {
	if req.GetVersion() != protocol.Version {
		return &protocol.Malformed{MessageID: req.GetMessageId(), Version: req.GetVersion(), Payload: payloadName(req),
			Detail: fmt.Sprintf("Request.version %d is not supported; this sink speaks version %d", req.GetVersion(), protocol.Version)}, nil
	}
	switch p := req.GetPayload().(type) {
	case *sluicev1.Request_Hello:
		h := p.Hello
		codecs := make([]protocol.Codec, len(h.GetCodecs()))
		for i, c := range h.GetCodecs() {
			codecs[i] = protocol.Codec(c)
		}
		return &protocol.Hello{AgentID: h.GetAgentId(), Version: h.GetProtocolVersion(), Codecs: codecs,
			DictionaryIDs: h.GetDictionaryIds(), Watermark: h.GetWatermark(), SentBelow: h.GetSentBelow(), HasSentBelow: h.SentBelow != nil}, nil
	case *sluicev1.Request_Plain:
		return &protocol.Message{ID: req.GetMessageId(), Records: req.GetRecordCount(), Codec: protocol.CodecPlain, Payload: p.Plain}, nil
	case *sluicev1.Request_Zstd:
		return &protocol.Message{ID: req.GetMessageId(), Records: req.GetRecordCount(), Codec: protocol.CodecZstd, Payload: p.Zstd}, nil
	case *sluicev1.Request_ZstdDict:
		return &protocol.Message{ID: req.GetMessageId(), Records: req.GetRecordCount(), Codec: protocol.CodecZstdDict,
			DictID: p.ZstdDict.GetDictionaryId(), Payload: p.ZstdDict.GetData()}, nil
	case *sluicev1.Request_KafkaZstd:
		return &protocol.Message{ID: req.GetMessageId(), Records: req.GetRecordCount(), Codec: protocol.CodecKafkaZstd, Payload: p.KafkaZstd}, nil
	case *sluicev1.Request_Dictionary:
		return &protocol.Dictionary{ID: p.Dictionary.GetId(), Data: p.Dictionary.GetData()}, nil
	}
	return &protocol.Malformed{MessageID: req.GetMessageId(), Version: req.GetVersion(), Payload: "no payload",
		Detail: "Request without a payload"}, nil
}

// payloadName names what a Request carries, for the sink's errors.
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
	case *sluicev1.Request_KafkaZstd:
		return "kafka_zstd"
	case *sluicev1.Request_Dictionary:
		return "dictionary"
	}
	return "no payload"
}

func toCredits(c *protocol.Credits) *sluicev1.Credits {
	if c == nil {
		return nil
	}
	return &sluicev1.Credits{MessageLimit: c.Messages, ByteLimit: c.Bytes}
}

func fromCredits(c *sluicev1.Credits) *protocol.Credits {
	if c == nil {
		return nil
	}
	return &protocol.Credits{Messages: c.GetMessageLimit(), Bytes: c.GetByteLimit()}
}

// ResponseFromFrame is the Response carrying a sink → agent frame.
func ResponseFromFrame(f protocol.Frame) (*sluicev1.Response, error) {
	resp := &sluicev1.Response{Version: protocol.Version}
	switch f := f.(type) {
	case *protocol.Welcome:
		resp.Body = &sluicev1.Response_Welcome{Welcome: &sluicev1.Welcome{
			Credits: toCredits(&f.Credits), MaxMessageBytes: f.MaxMessageBytes, DictionaryIds: f.DictionaryIDs,
			ProtocolVersion: f.Version, SessionId: f.SessionID, Codec: sluicev1.Codec(f.Codec),
		}}
	case *protocol.Ack:
		rs := make([]*sluicev1.IdRange, len(f.Ranges))
		for i, r := range f.Ranges {
			rs[i] = &sluicev1.IdRange{First: r.First, Last: r.Last}
		}
		resp.Body = &sluicev1.Response_Ack{Ack: &sluicev1.Ack{Ranges: rs}}
	case *protocol.Credit:
		info := &sluicev1.ServiceMessage{Credits: toCredits(f.Credits), QueueCapacity: f.QueueCapacity, DictionaryIds: f.DictionaryIDs}
		if f.Store != nil {
			info.StoreStatus = &sluicev1.StoreStatus{Available: f.Store.Available, Detail: f.Store.Detail}
		}
		resp.Body = &sluicev1.Response_Info{Info: info}
	case *protocol.Error:
		resp.Body = &sluicev1.Response_Info{Info: &sluicev1.ServiceMessage{Credits: toCredits(f.Credits), Error: &sluicev1.MessageError{
			MessageId: f.MessageID, Code: sluicev1.ErrorCode(f.Code), Detail: f.Detail, Retryable: f.Retryable,
		}}}
	default:
		return nil, fmt.Errorf("a %s frame is not sent by a sink on a Send session", protocol.Name(f))
	}
	return resp, nil
}

// FramesFromResponse appends to dst the frames a Response carries: one,
// except a ServiceMessage with both an update and an error, which is a
// Credit followed by an Error. A Response the agent does not understand
// (a newer sink's) carries none.
func FramesFromResponse(dst []protocol.Frame, r *sluicev1.Response) []protocol.Frame {
	switch b := r.GetBody().(type) {
	case *sluicev1.Response_Welcome:
		w := b.Welcome
		var cr protocol.Credits
		if c := fromCredits(w.GetCredits()); c != nil {
			cr = *c
		}
		return append(dst, &protocol.Welcome{Version: w.GetProtocolVersion(), Credits: cr, MaxMessageBytes: w.GetMaxMessageBytes(),
			DictionaryIDs: w.GetDictionaryIds(), SessionID: w.GetSessionId(), Codec: protocol.Codec(w.GetCodec())})
	case *sluicev1.Response_Ack:
		rs := make([]protocol.IDRange, len(b.Ack.GetRanges()))
		for i, r := range b.Ack.GetRanges() {
			rs[i] = protocol.IDRange{First: r.GetFirst(), Last: r.GetLast()}
		}
		return append(dst, &protocol.Ack{Ranges: rs})
	case *sluicev1.Response_Info:
		info := b.Info
		if info.GetCredits() != nil || info.GetQueueCapacity() != 0 || len(info.GetDictionaryIds()) > 0 || info.GetStoreStatus() != nil {
			c := &protocol.Credit{Credits: fromCredits(info.GetCredits()), QueueCapacity: info.GetQueueCapacity(), DictionaryIDs: info.GetDictionaryIds()}
			if st := info.GetStoreStatus(); st != nil {
				c.Store = &protocol.StoreStatus{Available: st.GetAvailable(), Detail: st.GetDetail()}
			}
			dst = append(dst, c)
		}
		if e := info.GetError(); e != nil {
			dst = append(dst, &protocol.Error{MessageID: e.GetMessageId(), Code: protocol.ErrorCode(e.GetCode()), Detail: e.GetDetail(), Retryable: e.GetRetryable()})
		}
	}
	return dst
}

// ReadRequestFromFrame is the ReadRequest carrying a consumer's frame.
func ReadRequestFromFrame(f protocol.Frame) (*sluicev1.ReadRequest, error) {
	switch f := f.(type) {
	case *protocol.ReadStart:
		return &sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Start{Start: &sluicev1.ReadStart{
			FromOffset: f.From, FromCommitted: f.FromCommitted, Follow: f.Follow, Group: f.Group}}}, nil
	case *protocol.ReadMore:
		return &sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_RequestN{RequestN: f.N}}, nil
	case *protocol.Commit:
		return &sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Commit{Commit: f.Offset}}, nil
	}
	return nil, fmt.Errorf("a %s frame is not sent by a consumer", protocol.Name(f))
}

// FrameFromReadRequest is the frame a ReadRequest carries.
func FrameFromReadRequest(r *sluicev1.ReadRequest) (protocol.Frame, error) {
	switch b := r.GetBody().(type) {
	case *sluicev1.ReadRequest_Start:
		s := b.Start
		return &protocol.ReadStart{From: s.GetFromOffset(), FromCommitted: s.GetFromCommitted(), Follow: s.GetFollow(), Group: s.GetGroup()}, nil
	case *sluicev1.ReadRequest_RequestN:
		return &protocol.ReadMore{N: b.RequestN}, nil
	case *sluicev1.ReadRequest_Commit:
		return &protocol.Commit{Offset: b.Commit}, nil
	}
	return nil, protocol.Errorf(protocol.StatusInvalid, "empty read request")
}

// ReadResponseFromFrame is the ReadResponse carrying a sink's read frame.
// The records are referenced, not copied.
func ReadResponseFromFrame(f protocol.Frame) (*sluicev1.ReadResponse, error) {
	switch f := f.(type) {
	case *protocol.Stored:
		return &sluicev1.ReadResponse{Body: &sluicev1.ReadResponse_Message{Message: &sluicev1.StoredMessage{
			Offset: f.Offset, AgentId: f.AgentID, MessageId: f.MessageID, Records: f.Records}}}, nil
	case *protocol.EndOfLog:
		return &sluicev1.ReadResponse{Body: &sluicev1.ReadResponse_End{End: &sluicev1.EndOfLog{NextOffset: f.Next}}}, nil
	}
	return nil, fmt.Errorf("a %s frame is not sent by a sink on a Read session", protocol.Name(f))
}

// FrameFromReadResponse is the frame a ReadResponse carries.
func FrameFromReadResponse(r *sluicev1.ReadResponse) (protocol.Frame, error) {
	switch b := r.GetBody().(type) {
	case *sluicev1.ReadResponse_Message:
		m := b.Message
		return &protocol.Stored{Offset: m.GetOffset(), AgentID: m.GetAgentId(), MessageID: m.GetMessageId(), Records: m.GetRecords()}, nil
	case *sluicev1.ReadResponse_End:
		return &protocol.EndOfLog{Next: b.End.GetNextOffset()}, nil
	}
	return nil, protocol.Errorf(protocol.StatusInvalid, "empty read response")
}
