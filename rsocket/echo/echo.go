// Package echo is the responder of `sluice rsocket serve`, public so that
// interoperability tests and users' own servers answer by the same rules.
// The rules:
//
//   - REQUEST_RESPONSE answers one PAYLOAD with the request's data and
//     metadata;
//   - REQUEST_STREAM with data "n" (ASCII decimal) emits "0" … "n-1" as
//     REQUEST_N allows, then completes; other data is APPLICATION_ERROR;
//   - REQUEST_CHANNEL sends every inbound payload back and completes when
//     the requester does;
//   - data starting with "error:" is APPLICATION_ERROR with the rest as
//     its message;
//   - routing metadata (composite, message/x.rsocket.routing.v0): no route
//     or "echo" echoes, another route is APPLICATION_ERROR "unknown route: R";
//   - REQUEST_FNF and METADATA_PUSH are only reported to Hooks.
package echo

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/extension"
)

// Model names passed to Hooks.Request.
const (
	RequestResponse = "request_response"
	FireAndForget   = "fire_and_forget"
	RequestStream   = "request_stream"
	RequestChannel  = "request_channel"
)

// Hooks report what only the serving side can see. Nil hooks are skipped;
// hooks run on the handler's goroutine and must not block for long.
type Hooks struct {
	// Request is called for every request, with its model, before the
	// rules above are applied.
	Request func(model string)
	// FireAndForget and MetadataPush receive what those frames carried.
	FireAndForget func(p rsocket.Payload)
	MetadataPush  func(metadata []byte)
	// StreamStopped is called when a stream of n elements ends after sent
	// of them because Send failed (the requester cancelled, or the
	// connection broke).
	StreamStopped func(n, sent uint64, err error)
}

// Responder answers by the package's rules. The zero value works.
type Responder struct {
	Hooks Hooks
}

var _ rsocket.Responder = (*Responder)(nil)

// check counts the request and applies the rules every model shares.
func (e *Responder) check(model string, p rsocket.Payload) error {
	if e.Hooks.Request != nil {
		e.Hooks.Request(model)
	}
	if p.Metadata != nil {
		// Metadata that is not composite, or has no routing, means no route.
		if ent, ok, err := extension.FindComposite(p.Metadata, extension.RoutingMIME); err == nil && ok {
			if tag, ok, err := extension.FirstRoute(ent.Metadata); err == nil && ok && string(tag) != "echo" {
				return rsocket.ApplicationError("unknown route: %s", tag)
			}
		}
	}
	if msg, ok := strings.CutPrefix(string(p.Data), "error:"); ok {
		return rsocket.ApplicationError("%s", msg)
	}
	return nil
}

// RequestResponse echoes p.
func (e *Responder) RequestResponse(_ context.Context, p rsocket.Payload) (rsocket.Payload, error) {
	if err := e.check(RequestResponse, p); err != nil {
		return rsocket.Payload{}, err
	}
	return p, nil
}

// FireAndForget reports p.
func (e *Responder) FireAndForget(_ context.Context, p rsocket.Payload) {
	if e.Hooks.Request != nil {
		e.Hooks.Request(FireAndForget)
	}
	if e.Hooks.FireAndForget != nil {
		e.Hooks.FireAndForget(p)
	}
}

// MetadataPush reports the metadata.
func (e *Responder) MetadataPush(_ context.Context, metadata []byte) {
	if e.Hooks.MetadataPush != nil {
		e.Hooks.MetadataPush(metadata)
	}
}

// RequestStream sends "0" … "n-1" for data "n".
func (e *Responder) RequestStream(_ context.Context, p rsocket.Payload, out *rsocket.Sink) error {
	if err := e.check(RequestStream, p); err != nil {
		return err
	}
	n, err := strconv.ParseUint(string(p.Data), 10, 63)
	if err != nil {
		return rsocket.ApplicationError("stream data %q is not a number of elements", p.Data)
	}
	// In batches: one lock round and one write per batch (SendBatch).
	const batch = 64
	var ps [batch]rsocket.Payload
	buf := make([]byte, 0, batch*20) // 20 digits hold any uint64
	for i := uint64(0); i < n; {
		k := min(n-i, batch)
		buf = buf[:0]
		for j := range k {
			at := len(buf)
			buf = strconv.AppendUint(buf, i+j, 10)
			ps[j] = rsocket.Payload{Data: buf[at:len(buf):len(buf)]}
		}
		sent, err := out.SendBatch(ps[:k])
		if err != nil {
			if e.Hooks.StreamStopped != nil {
				e.Hooks.StreamStopped(n, i+uint64(sent), err)
			}
			return err
		}
		i += k
	}
	return nil
}

// RequestChannel echoes the first payload and every one after it.
func (e *Responder) RequestChannel(_ context.Context, p rsocket.Payload, in *rsocket.Stream, out *rsocket.Sink) error {
	if err := e.check(RequestChannel, p); err != nil {
		return err
	}
	if err := out.Send(p); err != nil {
		return err
	}
	for {
		q, err := in.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := out.Send(q); err != nil {
			return err
		}
	}
}

// NonBlocking marks the responder as rsocket.NonBlocking: its
// RequestResponse neither blocks nor keeps the request, so it runs on the
// connection's reader goroutine. Hooks must then not block either.
func (e *Responder) NonBlocking() {}
