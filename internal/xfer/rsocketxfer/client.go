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
	u := &upload{ctx: ctx, cancel: cancel, ch: ch, res: make(chan result, 1)}
	go u.answers()
	return u, nil
}

// upload is one upload's channel.
type upload struct {
	ctx    context.Context
	cancel context.CancelFunc
	ch     *rsocket.Channel
	res    chan result // the server's last answer
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

func (u *upload) Chunk(c xfer.Chunk) error {
	meta := []byte{rsChunk, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(meta[1:], c.CRC32C)
	// A copy: the public API does not say when Send is done with the
	// bytes, and the next chunk reuses the buffer.
	return u.ch.Send(rsocket.Payload{Metadata: meta, Data: append([]byte(nil), c.Data...)})
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
