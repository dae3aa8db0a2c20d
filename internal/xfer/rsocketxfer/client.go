package rsocketxfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

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
	c, err := rsocket.Dial(ctx, s.url, clientOptions()...)
	if err != nil {
		return nil, err
	}
	s.c = c
	return c, nil
}

// clientOptions are the client's connection options. It offers the
// byte-credits extension (ignored by a server without it): only a client's
// offer turns it on, and without it the server's 8 MiB window
// (ByteCredits) did not hold, so an upload was bounded by its 1,024 channel
// credits and the server's read budget alone. At 128 KiB chunks 12 MiB
// then queued at the server, beyond the frame buffers a stream may be lent
// (twice the window), and 3 to 4 chunks in 10 were copied for the
// application instead of handed over in their frames (docs/benchmarks.md,
// "Issue 27, RSocket's window"). Its own window is what the client grants
// the server's answers, a few bytes each.
func clientOptions() []rsocket.Option {
	return []rsocket.Option{rsocket.WithMaxPayloadSize(MaxPayloadSize), rsocket.WithByteCredits(ByteCredits)}
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

// fromRSocket turns an ERROR of ours into a *xfer.RemoteError, and a
// refusal of our wire version into a permanent error: it would be the
// same on every retry.
func fromRSocket(err error) error {
	var re *rsocket.Error
	if !errors.As(err, &re) {
		return err
	}
	switch {
	case xfer.OurMessage(re.Message):
		return xfer.DecodeRemote(re.Message)
	case strings.HasPrefix(re.Message, versionPrefix):
		return xfer.Permanent(fmt.Errorf("the server refused our message: %s", re.Message))
	case olderServer(re.Message):
		return xfer.Permanent(fmt.Errorf("the server speaks the older protobuf encoding of xfer over RSocket (%q), this client xfer wire version %d: run the same sluice release on both ends", re.Message, WireVersion))
	}
	return err
}

// badAnswer is the error of an answer that does not decode: permanent
// when it is of another wire version.
func badAnswer(what string, err error) error {
	err = fmt.Errorf("bad %s answer: %w", what, err)
	if errors.As(err, new(*VersionError)) {
		return xfer.Permanent(err)
	}
	return err
}

// Offset asks the server's offset and size for name.
func (s *Client) Offset(ctx context.Context, name string) (int64, int64, bool, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return 0, 0, false, err
	}
	p, err := c.RequestResponse(ctx, rsocket.Payload{Metadata: []byte(MetaOffset), Data: AppendOffsetRequest(nil, name)})
	if err != nil {
		return 0, 0, false, fromRSocket(err)
	}
	a, err := DecodeOffsetAnswer(p.Data)
	if err != nil {
		return 0, 0, false, badAnswer("offset", err)
	}
	return a.Offset, a.Size, a.Exists, nil
}

// Begin opens the upload's REQUEST_CHANNEL, its Begin the first payload.
func (s *Client) Begin(ctx context.Context, out xfer.Outgoing) (xfer.Stream, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	begin := AppendBegin(nil, Begin{Name: out.Name, Size: out.Size, Offset: out.From})
	ch, err := c.RequestChannel(ctx, rsocket.Payload{Metadata: []byte(MetaUpload), Data: begin}, 64)
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
	res    chan result        // the server's last answer
	meta   [chunkMetaLen]byte // a chunk's metadata, reused: Send is done with it on return
	// lent counts the Stable chunks sent without a copy
	// (rsocket.Sink.SendLent) that the connection may still refer to:
	// Close waits for them, so that the caller's memory is its own again
	// when the upload ends.
	lent    sync.WaitGroup
	written func() // lent.Done, bound once: a method value per chunk allocates
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
		a, err := DecodeUploadAnswer(p.Data)
		if err != nil {
			u.res <- result{err: badAnswer("upload", err)}
			return
		}
		if a.Done {
			// A copy: the payload's buffer may be the connection's.
			u.res <- result{sum: append([]byte(nil), a.SHA256...)}
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
//
// A Stable chunk (a slice of the caller's file in memory) is not even
// copied into its frame: the connection writes it from the caller's
// memory after the frame's head (rsocket.Sink.SendLent), and Close waits
// until it did (TestStableChunksNotCopied).
func (u *upload) Chunk(c xfer.Chunk) error {
	putChunkMeta(&u.meta, c.CRC32C)
	p := rsocket.Payload{Metadata: u.meta[:], Data: c.Data}
	if !c.Stable {
		return u.ch.Send(p)
	}
	u.lent.Add(1)
	if u.written == nil {
		u.written = u.lent.Done
	}
	err := u.ch.SendLent(p, u.written)
	if err != nil {
		u.lent.Done() // not lent: SendLent calls written only on success
	}
	return err
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
	if err := u.ch.Send(rsocket.Payload{Metadata: []byte{metaFinish}, Data: sum}); err != nil {
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

func (u *upload) Close() {
	u.cancel()
	// The connection writes or drops every lent chunk: its write timeout
	// bounds this wait.
	u.lent.Wait()
}
