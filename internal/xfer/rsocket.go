package xfer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/protobuf/proto"

	xferv1 "github.com/sluicehq/sluice/api/xfer/v1"
	"github.com/sluicehq/sluice/rsocket"
)

// Over RSocket, an upload is one REQUEST_CHANNEL. Its first payload has
// metadata "upload" and an xfer.v1.Begin as data; each further payload is
// a chunk (metadata: 'c' then the CRC32C, big endian; data: the bytes) or
// the finish (metadata 'f'; data: the client's SHA-256). The server sends
// an xfer.v1.UploadResponse back at each durable checkpoint (size: the
// offset) and a last one with the SHA-256 once the file is in place; a
// refusal is ERROR[APPLICATION_ERROR] "code: message". The offset is a
// REQUEST_RESPONSE with metadata "offset" and an xfer.v1.OffsetRequest.
const (
	rsMetaUpload = "upload"
	rsMetaOffset = "offset"
	rsChunk      = 'c'
	rsFinish     = 'f'
)

// RSocketResponder serves a Backend over RSocket.
type RSocketResponder struct {
	rsocket.UnimplementedResponder
	Store Backend
}

func rsError(err error) error { return rsocket.ApplicationError("%s", encodeRemote(err)) }

func (r *RSocketResponder) RequestResponse(_ context.Context, p rsocket.Payload) (rsocket.Payload, error) {
	if string(p.Metadata) != rsMetaOffset {
		return rsocket.Payload{}, rsocket.ApplicationError("unknown request %q", p.Metadata)
	}
	var req xferv1.OffsetRequest
	if err := proto.Unmarshal(p.Data, &req); err != nil {
		return rsocket.Payload{}, rsocket.ApplicationError("bad offset request: %v", err)
	}
	if err := ValidateName(req.GetName()); err != nil {
		return rsocket.Payload{}, rsError(err)
	}
	resp := &xferv1.OffsetResponse{}
	if in, err := r.Store.Stat(req.GetName()); err == nil {
		resp = &xferv1.OffsetResponse{Offset: in.Offset, Size: in.Size, Exists: true}
	}
	b, _ := proto.Marshal(resp)
	return rsocket.Payload{Data: b}, nil
}

func (r *RSocketResponder) RequestChannel(ctx context.Context, p rsocket.Payload, in *rsocket.Stream, out *rsocket.Sink) error {
	if string(p.Metadata) != rsMetaUpload {
		return rsocket.ApplicationError("unknown channel %q", p.Metadata)
	}
	var b xferv1.Begin
	if err := proto.Unmarshal(p.Data, &b); err != nil {
		return rsocket.ApplicationError("bad begin: %v", err)
	}
	var sha []byte
	if len(b.GetSha256()) > 0 {
		sha = b.GetSha256()
	}
	u, err := r.Store.Begin(b.GetName(), b.GetSize(), sha, "", false)
	if err != nil {
		return rsError(err)
	}
	defer u.Release()
	off := b.GetOffset()
	if have := u.Offset(); off != have {
		return rsError(&OffsetError{Want: off, Have: have})
	}
	acked := u.Info().Offset
	for {
		m, err := in.Next()
		if err == io.EOF {
			return rsError(ErrIncomplete)
		}
		if err != nil {
			return err
		}
		if len(m.Metadata) == 0 {
			return rsocket.ApplicationError("payload without metadata")
		}
		switch m.Metadata[0] {
		case rsChunk:
			if len(m.Metadata) != 5 {
				return rsocket.ApplicationError("chunk metadata of %d bytes, want 5", len(m.Metadata))
			}
			n, err := u.Write(off, m.Data, binary.BigEndian.Uint32(m.Metadata[1:]))
			if err != nil {
				return rsError(err)
			}
			off = n
			if d := u.Info().Offset; d != acked {
				acked = d
				ack, _ := proto.Marshal(&xferv1.UploadResponse{Size: d})
				if err := out.Send(rsocket.Payload{Data: ack}); err != nil {
					return err
				}
			}
		case rsFinish:
			var want []byte
			if len(m.Data) > 0 {
				want = m.Data
			}
			sum, err := u.Finish(want, "rsocket")
			if err != nil {
				return rsError(err)
			}
			fin, _ := proto.Marshal(&xferv1.UploadResponse{Size: off, Sha256: sum})
			return out.Send(rsocket.Payload{Data: fin})
		default:
			return rsocket.ApplicationError("unknown payload kind %q", m.Metadata[0])
		}
	}
}

// rsocketSender is the RSocket client side of Send: one connection,
// dialled again after it failed.
type rsocketSender struct {
	url string
	c   *rsocket.Conn
}

func newRSocketSender(url string) *rsocketSender { return &rsocketSender{url: url} }

func (s *rsocketSender) conn(ctx context.Context) (*rsocket.Conn, error) {
	if s.c != nil {
		select {
		case <-s.c.Done():
			s.c = nil
		default:
			return s.c, nil
		}
	}
	c, err := rsocket.Dial(ctx, s.url, rsocket.WithMaxPayloadSize(MaxChunk+1<<16))
	if err != nil {
		return nil, err
	}
	s.c = c
	return c, nil
}

// reset drops the connection; the next call dials again.
func (s *rsocketSender) reset() {
	if s.c != nil {
		s.c.Close()
		s.c = nil
	}
}

func (s *rsocketSender) Close() error {
	if s.c != nil {
		return s.c.Close()
	}
	return nil
}

// fromRSocket turns an ERROR of ours into a *RemoteError.
func fromRSocket(err error) error {
	var re *rsocket.Error
	if errors.As(err, &re) && ourMessage(re.Message) {
		return decodeRemote(re.Message)
	}
	return err
}

func (s *rsocketSender) offset(ctx context.Context, name string) (int64, int64, bool, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return 0, 0, false, err
	}
	req, _ := proto.Marshal(&xferv1.OffsetRequest{Name: name})
	p, err := c.RequestResponse(ctx, rsocket.Payload{Metadata: []byte(rsMetaOffset), Data: req})
	if err != nil {
		return 0, 0, false, fromRSocket(err)
	}
	var r xferv1.OffsetResponse
	if err := proto.Unmarshal(p.Data, &r); err != nil {
		return 0, 0, false, fmt.Errorf("bad offset answer: %w", err)
	}
	return r.GetOffset(), r.GetSize(), r.GetExists(), nil
}

func (s *rsocketSender) send(ctx context.Context, j *job) ([]byte, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	begin, _ := proto.Marshal(&xferv1.Begin{Name: j.name, Size: j.size, Offset: j.from})
	ch, err := c.RequestChannel(ctx, rsocket.Payload{Metadata: []byte(rsMetaUpload), Data: begin}, 64)
	if err != nil {
		return nil, fromRSocket(err)
	}
	// The server's answers: acks of durable offsets, then the SHA-256 or
	// an ERROR. Read on their own so the server never blocks on them.
	type result struct {
		sum []byte
		err error
	}
	res := make(chan result, 1)
	go func() {
		for {
			p, err := ch.Next()
			if err != nil {
				if err == io.EOF {
					err = errors.New("the server ended the upload without an answer")
				}
				res <- result{err: fromRSocket(err)}
				return
			}
			var r xferv1.UploadResponse
			if err := proto.Unmarshal(p.Data, &r); err != nil {
				res <- result{err: fmt.Errorf("bad answer: %w", err)}
				return
			}
			if len(r.GetSha256()) > 0 {
				res <- result{sum: r.GetSha256()}
				return
			}
		}
	}()
	err = j.chunks(func(off int64, p []byte, crc uint32) error {
		meta := []byte{rsChunk, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(meta[1:], crc)
		// A copy: the public API does not say when Send is done with the
		// bytes, and the next chunk reuses the buffer.
		return ch.Send(rsocket.Payload{Metadata: meta, Data: append([]byte(nil), p...)})
	})
	if err == nil {
		err = ch.Send(rsocket.Payload{Metadata: []byte{rsFinish}, Data: j.sum()})
	}
	if err != nil {
		var pe *permanentError
		if errors.As(err, &pe) {
			return nil, err
		}
		// A refusal ends the channel: its reason is on the answer side.
		select {
		case r := <-res:
			if r.err != nil {
				return nil, r.err
			}
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		return nil, fromRSocket(err)
	}
	select {
	case r := <-res:
		ch.Complete()
		return r.sum, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
