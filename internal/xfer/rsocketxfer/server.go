// Package rsocketxfer is file transfer over RSocket: its server adapter
// (a responder) over an xfer.Backend, and its client for the upload loop
// of internal/xfer/send. Its payloads are xfer.v1 protobuf messages.
package rsocketxfer

import (
	"context"
	"encoding/binary"
	"io"

	"google.golang.org/protobuf/proto"

	xferv1 "github.com/sluicehq/sluice/api/xfer/v1"
	"github.com/sluicehq/sluice/internal/xfer"
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

// Responder serves an xfer.Backend over RSocket.
type Responder struct {
	rsocket.UnimplementedResponder
	Store xfer.Backend
}

func rsError(err error) error { return rsocket.ApplicationError("%s", xfer.EncodeRemote(err)) }

func (r *Responder) RequestResponse(_ context.Context, p rsocket.Payload) (rsocket.Payload, error) {
	if string(p.Metadata) != rsMetaOffset {
		return rsocket.Payload{}, rsocket.ApplicationError("unknown request %q", p.Metadata)
	}
	var req xferv1.OffsetRequest
	if err := proto.Unmarshal(p.Data, &req); err != nil {
		return rsocket.Payload{}, rsocket.ApplicationError("bad offset request: %v", err)
	}
	if err := xfer.ValidateName(req.GetName()); err != nil {
		return rsocket.Payload{}, rsError(err)
	}
	resp := &xferv1.OffsetResponse{}
	if in, err := r.Store.Stat(req.GetName()); err == nil {
		resp = &xferv1.OffsetResponse{Offset: in.Offset, Size: in.Size, Exists: true}
	}
	b, _ := proto.Marshal(resp)
	return rsocket.Payload{Data: b}, nil
}

func (r *Responder) RequestChannel(ctx context.Context, p rsocket.Payload, in *rsocket.Stream, out *rsocket.Sink) error {
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
		return rsError(&xfer.OffsetError{Want: off, Have: have})
	}
	acked := u.Info().Offset
	for {
		m, err := in.Next()
		if err == io.EOF {
			return rsError(xfer.ErrIncomplete)
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

// MaxPayloadSize is the payload limit of both ends: a chunk of
// xfer.MaxChunk and its metadata.
const MaxPayloadSize = xfer.MaxChunk + 1<<16
