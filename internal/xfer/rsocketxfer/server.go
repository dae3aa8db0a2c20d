// Package rsocketxfer is file transfer over RSocket: its server adapter
// (a responder) over an xfer.Backend, and its client for the upload loop
// of internal/xfer/send. Its payloads have their own small binary
// encoding (wire.go), so that protobuf stays in the gRPC adapter.
package rsocketxfer

import (
	"context"
	"io"

	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/rsocket"
)

// Over RSocket, an upload is one REQUEST_CHANNEL. Its first payload has
// metadata "upload" and a Begin as data; each further payload is a chunk
// (metadata: 'c' then the CRC32C, big endian; data: the bytes) or the
// finish (metadata 'f'; data: the client's SHA-256). The server sends an
// ack of the durable offset at each checkpoint and a last answer with
// the SHA-256 once the file is in place; a refusal is
// ERROR[APPLICATION_ERROR] "code: message". The offset is a
// REQUEST_RESPONSE with metadata "offset" and an offset request.

// Responder serves an xfer.Backend over RSocket.
type Responder struct {
	rsocket.UnimplementedResponder
	Store xfer.Backend
}

func rsError(err error) error { return rsocket.ApplicationError("%s", xfer.EncodeRemote(err)) }

// badMessage refuses a message that does not decode; a version mismatch
// goes as it is, so that the client recognises it (versionPrefix).
func badMessage(what string, err error) error {
	if _, ok := err.(*VersionError); ok {
		return rsocket.ApplicationError("%s", err)
	}
	return rsocket.ApplicationError("bad %s: %v", what, err)
}

func (r *Responder) RequestResponse(_ context.Context, p rsocket.Payload) (rsocket.Payload, error) {
	if string(p.Metadata) != MetaOffset {
		return rsocket.Payload{}, rsocket.ApplicationError("unknown request %q", p.Metadata)
	}
	name, err := DecodeOffsetRequest(p.Data)
	if err != nil {
		return rsocket.Payload{}, badMessage("offset request", err)
	}
	if err := xfer.ValidateName(name); err != nil {
		return rsocket.Payload{}, rsError(err)
	}
	var a OffsetAnswer
	if in, err := r.Store.Stat(name); err == nil {
		a = OffsetAnswer{Offset: in.Offset, Size: in.Size, Exists: true}
	}
	return rsocket.Payload{Data: AppendOffsetAnswer(nil, a)}, nil
}

func (r *Responder) RequestChannel(ctx context.Context, p rsocket.Payload, in *rsocket.Stream, out *rsocket.Sink) error {
	if string(p.Metadata) != MetaUpload {
		return rsocket.ApplicationError("unknown channel %q", p.Metadata)
	}
	b, err := DecodeBegin(p.Data)
	if err != nil {
		return badMessage("begin", err)
	}
	u, err := r.Store.Begin(b.Name, b.Size, b.SHA256, "", false)
	if err != nil {
		return rsError(err)
	}
	defer u.Release()
	off := b.Offset
	if have := u.Offset(); off != have {
		return rsError(&xfer.OffsetError{Want: off, Have: have})
	}
	return receive(u, off, in, out)
}

// receive writes an upload's chunks from off, acking each new durable
// offset, until its finish.
func receive(u xfer.BackendUpload, off int64, in *rsocket.Stream, out *rsocket.Sink) error {
	acked := u.Info().Offset
	var ack [ackLen]byte // reused: Send copies it
	// Each chunk is given back once the store copied it (below), so the
	// connection hands chunks over in their frames' buffers, with no copy
	// and no allocation per chunk (rsocket.Stream.Release).
	in.Release(rsocket.Payload{})
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
		case metaChunk:
			crc, err := decodeChunkMeta(m.Metadata)
			if err != nil {
				return rsocket.ApplicationError("%v", err)
			}
			n, err := u.Write(off, m.Data, crc)
			in.Release(m) // the store copied it
			if err != nil {
				return rsError(err)
			}
			off = n
			if d := u.Info().Offset; d != acked {
				acked = d
				if err := out.Send(rsocket.Payload{Data: AppendUploadAnswer(ack[:0], UploadAnswer{Offset: d})}); err != nil {
					return err
				}
			}
		case metaFinish:
			var want []byte
			if len(m.Data) > 0 {
				want = m.Data
			}
			sum, err := u.Finish(want, "rsocket")
			if err != nil {
				return rsError(err)
			}
			return out.Send(rsocket.Payload{Data: AppendUploadAnswer(nil, UploadAnswer{Offset: off, Done: true, SHA256: sum})})
		default:
			return rsocket.ApplicationError("unknown payload kind %q", m.Metadata[0])
		}
	}
}

// MaxPayloadSize is the payload limit of both ends: a chunk of
// xfer.MaxChunk and its metadata.
const MaxPayloadSize = xfer.MaxChunk + 1<<16

// An upload's window: what a sender may have in flight before the server
// took any of it. RSocket's default (64 REQUEST_N credits per channel)
// made it 64 chunks: 1 MiB at 16 KiB chunks, which at 150 ms of round
// trip caps an upload near 7 MB/s (gRPC's xfer window is 8 MiB), and
// 256 MiB at 4 MiB chunks, which the server holds in memory. The server
// grants ChannelCredits items and, through sluice's byte-credits
// extension, ByteCredits bytes, whichever runs out first: 8 MiB in flight
// whatever the chunk size (a sender without the extension is held to
// ChannelCredits chunks and to the server's memory budget).
const (
	ChannelCredits = 1024
	ByteCredits    = 8 << 20
)

// ServerOptions are the options of an xfer RSocket server.
func ServerOptions() []rsocket.Option {
	return []rsocket.Option{rsocket.WithMaxPayloadSize(MaxPayloadSize),
		rsocket.WithChannelCredits(ChannelCredits), rsocket.WithByteCredits(ByteCredits),
		// receive releases each chunk: an upload's first window, which
		// arrives while Begin creates the partial, is not copied either.
		rsocket.WithReleasedChannels()}
}
