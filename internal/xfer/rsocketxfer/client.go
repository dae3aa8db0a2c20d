package rsocketxfer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/protobuf/proto"

	xferv1 "github.com/sluicehq/sluice/api/xfer/v1"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/rsocket"
)

// Client is the RSocket client of the upload loop (an xfer.Transport):
// one connection, dialled again after it failed.
type Client struct {
	url string
	c   *rsocket.Conn
}

// NewClient makes a client of the server at url (tcp://HOST:PORT); it
// connects on first use.
func NewClient(url string) *Client { return &Client{url: url} }

func (s *Client) conn(ctx context.Context) (*rsocket.Conn, error) {
	if s.c != nil {
		select {
		case <-s.c.Done():
			s.c = nil
		default:
			return s.c, nil
		}
	}
	c, err := rsocket.Dial(ctx, s.url, rsocket.WithMaxPayloadSize(MaxPayloadSize))
	if err != nil {
		return nil, err
	}
	s.c = c
	return c, nil
}

// Reset drops the connection; the next call dials again.
func (s *Client) Reset() {
	if s.c != nil {
		s.c.Close()
		s.c = nil
	}
}

// Close closes the connection.
func (s *Client) Close() error {
	if s.c != nil {
		return s.c.Close()
	}
	return nil
}

// fromRSocket turns an ERROR of ours into a *xfer.RemoteError.
func fromRSocket(err error) error {
	var re *rsocket.Error
	if errors.As(err, &re) && xfer.OurMessage(re.Message) {
		return xfer.DecodeRemote(re.Message)
	}
	return err
}

// Offset asks the server's offset and size for name.
func (s *Client) Offset(ctx context.Context, name string) (int64, int64, bool, error) {
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

// Begin opens the upload's REQUEST_CHANNEL, its Begin the first payload.
func (s *Client) Begin(ctx context.Context, out xfer.Outgoing) (xfer.Stream, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	begin, _ := proto.Marshal(&xferv1.Begin{Name: out.Name, Size: out.Size, Offset: out.From})
	ch, err := c.RequestChannel(ctx, rsocket.Payload{Metadata: []byte(rsMetaUpload), Data: begin}, 64)
	if err != nil {
		cancel()
		return nil, fromRSocket(err)
	}
	u := &upload{ctx: ctx, cancel: cancel, ch: ch, res: make(chan result, 1), meta: [5]byte{rsChunk}}
	go u.answers()
	return u, nil
}

// upload is one upload's channel.
type upload struct {
	ctx    context.Context
	cancel context.CancelFunc
	ch     *rsocket.Channel
	res    chan result // the server's last answer
	meta   [5]byte     // a chunk's metadata, reused: Send is done with it on return
}

type result struct {
	sum []byte
	err error
}

// answers reads the server's answers: acks of durable offsets, then the
// SHA-256 or an ERROR. Read on their own so the server never blocks on
// them.
func (u *upload) answers() {
	for {
		p, err := u.ch.Next()
		if err != nil {
			if err == io.EOF {
				err = errors.New("the server ended the upload without an answer")
			}
			u.res <- result{err: fromRSocket(err)}
			return
		}
		var r xferv1.UploadResponse
		if err := proto.Unmarshal(p.Data, &r); err != nil {
			u.res <- result{err: fmt.Errorf("bad answer: %w", err)}
			return
		}
		if len(r.GetSha256()) > 0 {
			u.res <- result{sum: r.GetSha256()}
			return
		}
	}
}

// Chunk sends c without copying it: Send has encoded the frame (copied
// the bytes into the connection's output) when it returns, so the loop may
// reuse c's buffer then (TestChunkBufferReusedAfterReturn). The copy this
// made before cost a quarter of the memmove of an RSocket upload and an
// allocation per chunk (profile in docs/xfer.md, "Where an upload's CPU
// goes").
func (u *upload) Chunk(c xfer.Chunk) error {
	binary.BigEndian.PutUint32(u.meta[1:], c.CRC32C)
	return u.ch.Send(rsocket.Payload{Metadata: u.meta[:], Data: c.Data})
}

// Cause: a refusal ends the channel; its reason is on the answer side.
func (u *upload) Cause(err error) error {
	select {
	case r := <-u.res:
		if r.err != nil {
			return r.err
		}
	case <-u.ctx.Done():
	case <-time.After(10 * time.Second):
	}
	return fromRSocket(err)
}

func (u *upload) Finish(sum []byte) ([]byte, error) {
	if err := u.ch.Send(rsocket.Payload{Metadata: []byte{rsFinish}, Data: sum}); err != nil {
		return nil, u.Cause(err)
	}
	select {
	case r := <-u.res:
		u.ch.Complete()
		return r.sum, r.err
	case <-u.ctx.Done():
		return nil, u.ctx.Err()
	}
}

func (u *upload) Close() { u.cancel() }
