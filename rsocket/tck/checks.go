package tck

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

type check struct {
	id, rule, section string
	echo              bool // needs the echo contract
	run               func(*T) (Status, string)
}

// Section names are Protocol.md's headings.
const (
	secEstablish  = "Connection Establishment"
	secSetup      = "SETUP Frame (0x01)"
	secKeepalive  = "KEEPALIVE Frame (0x03)"
	secUnexpected = "Handling the Unexpected"
	secIgnore     = "Handling Ignore Flag"
	secMetadata   = "Metadata Optional Header"
	secFlow       = "Reactive Streams Semantics"
	secReqN       = "REQUEST_N Frame (0x08)"
	secLifetimes  = "Stream Sequences and Lifetimes"
	secChannel    = "REQUEST_CHANNEL Frame (0x07)"
	secFragment   = "Fragmentation And Reassembly"
	secError      = "Error Codes"
	secResume     = "Resume Operation"
	secLease      = "Connection Establishment (lease)"
	secLeaseSem   = "Lease Semantics"
	secVersion    = "Versioning Scheme"
	secStreamIDs  = "Stream Identifiers"
	secPayload    = "PAYLOAD Frame (0x0A)"
	secFNF        = "Request Fire-n-Forget"
	secPush       = "METADATA_PUSH Frame (0x0C)"
)

var checks = []check{
	{"echo-contract", "the server answers request-response and request-stream as `sluice rsocket serve` does (needed by the checks marked so)", "(runner)", false, probeEcho},
	{"setup-first", "a first frame other than SETUP|RESUME gets ERROR[INVALID_SETUP] and the connection is closed", secEstablish, false, setupFirst},
	{"setup-stream-id", "a SETUP with stream id > 0 gets ERROR[INVALID_SETUP] and the connection is closed", secEstablish, false, setupStreamID},
	{"setup-version", "a SETUP with an unknown major version (99.0) is refused with ERROR[INVALID_SETUP|UNSUPPORTED_SETUP]", secEstablish, false, setupVersion},
	{"setup-minor-version", "a SETUP 1.1 (a minor version above 1.0) is refused with ERROR[INVALID_SETUP|UNSUPPORTED_SETUP] (accepting it: warn)", secVersion, false, setupMinorVersion},
	{"setup-resume", "a server without resume rejects a SETUP with R: ERROR[REJECTED_SETUP]", secSetup, false, setupResume},
	{"resume-unknown", "a RESUME with a token the server does not know gets ERROR[REJECTED_RESUME]", secResume, false, resumeUnknown},
	{"setup-lease", "a server that accepts a SETUP with L sends a LEASE (TTL > 0, count > 0)", secLease, false, setupLease},
	{"setup-lease-refused", "a server without lease answers a SETUP with L by ERROR[INVALID_SETUP|UNSUPPORTED_SETUP] and closes", secEstablish, false, setupLeaseRefused},
	{"lease-exhausted", "a request beyond the LEASE's number of requests gets ERROR[REJECTED]", secLeaseSem, true, leaseExhausted},
	{"resume-after-setup", "a RESUME after SETUP gets ERROR[CONNECTION_ERROR] (SHOULD; ignoring it: warn)", secResume, false, resumeAfterSetup},
	{"lease-after-resume", "after RESUME_OK the server sends a LEASE (lease and resume both on)", secResume, false, leaseAfterResume},
	{"keepalive-echo", "KEEPALIVE with R is answered by KEEPALIVE without R and the same data", secKeepalive, false, keepaliveEcho},
	{"ignore-cancel", "CANCEL on an unknown stream, and on stream 0, is ignored", secUnexpected, false, ignoreCancel},
	{"ignore-payload", "PAYLOAD on an unknown stream, and on stream 0, is ignored", secUnexpected, false, ignorePayload},
	{"ignore-error", "ERROR on an unknown stream is ignored", secUnexpected, false, ignoreError},
	{"ignore-metadata-push", "METADATA_PUSH on a stream other than 0 is ignored", secUnexpected, false, ignoreMetadataPush},
	{"ignore-setup-again", "a SETUP after the accepted one is ignored", secUnexpected, false, ignoreSetupAgain},
	{"ignore-setup-errors", "ERROR[INVALID_SETUP|UNSUPPORTED_SETUP|REJECTED_SETUP|REJECTED_RESUME] from the client is ignored", secUnexpected, false, ignoreSetupErrors},
	{"ignore-request-in-use", "a request on a stream id in use is ignored", secUnexpected, true, ignoreRequestInUse},
	{"ignore-unknown-flags", "flag bits not defined for a frame are ignored (REQUEST_RESPONSE with N and C)", secUnexpected, true, ignoreUnknownFlags},
	{"ext-ignore", "an EXT frame with I of an unknown extended type is ignored", secIgnore, false, extIgnore},
	{"unknown-type-ignore", "a frame of an unknown type with I is ignored", secIgnore, false, unknownTypeIgnore},
	{"unknown-type-no-ignore", "a frame of an unknown type without I: ERROR[CONNECTION_ERROR] and close, or ignored", secIgnore, false, unknownTypeNoIgnore},
	{"metadata-length", "a metadata length beyond the frame gets ERROR[CONNECTION_ERROR] and the connection is closed", secMetadata, false, metadataLength},
	{"request-n-exact", "a responder sends no more PAYLOADs than the credits granted (REQUEST_STREAM n=3, REQUEST_N 2, 5)", secFlow, true, requestNExact},
	{"request-n-zero", "REQUEST_N with N=0 (MUST be > 0) grants nothing", secReqN, true, requestNZero},
	{"request-n-max", "2^31-1 credits plus 2^31-1 more do not overflow: the stream completes", secFlow, true, requestNMax},
	{"cancel-stops-stream", "after CANCEL the responder sends nothing more on the stream, even with new credits", secLifetimes, true, cancelStops},
	{"channel-request-n", "a responder answers an initial REQUEST_CHANNEL with REQUEST_N", secChannel, true, channelRequestN},
	{"fragmented-request", "a request fragmented into REQUEST_RESPONSE(F) + PAYLOAD(F) + PAYLOAD is reassembled (metadata first)", secFragment, true, fragmentedRequest},
	{"fnf-no-response", "a REQUEST_FNF gets no frame on its stream", secFNF, false, fnfNoResponse},
	{"metadata-push", "METADATA_PUSH on stream 0 gets no answer and the connection goes on", secPush, false, metadataPush},
	{"application-error", "a failing request gets ERROR[APPLICATION_ERROR] on its stream with the message", secError, true, applicationError},
}

type passiveCheck struct {
	id, rule, section string
	judge             func(*observer) (Status, string)
}

// passive checks judge every frame the server sent during the run.
var passive = []passiveCheck{
	{"frames-valid", "every frame the server sent decodes (lengths, fields, flags)", "Framing", func(o *observer) (Status, string) {
		if len(o.invalid) > 0 {
			return Fail, strings.Join(o.invalid, "; ")
		}
		return Pass, fmt.Sprintf("%d frames received", o.frames)
	}},
	{"error-codes", "ERROR codes are defined or application codes, connection codes on stream 0 only, stream codes on streams > 0", secError, func(o *observer) (Status, string) {
		if len(o.badErrors) > 0 {
			return Fail, strings.Join(o.badErrors, "; ")
		}
		return Pass, "every ERROR received"
	}},
	{"payload-n-or-c", "no PAYLOAD has both N and C unset", secPayload, func(o *observer) (Status, string) {
		if len(o.emptyPayloads) > 0 {
			return Fail, strings.Join(o.emptyPayloads, "; ")
		}
		return Pass, ""
	}},
	{"server-stream-ids", "a server's requests use even stream ids", secStreamIDs, func(o *observer) (Status, string) {
		if len(o.oddRequests) > 0 {
			return Fail, strings.Join(o.oddRequests, "; ")
		}
		if o.requests == 0 {
			return Skip, "the server sent no request"
		}
		return Pass, fmt.Sprintf("%d requests", o.requests)
	}},
	{"fragments-metadata-first", "in a fragmented response the metadata comes before the data", secFragment, func(o *observer) (Status, string) {
		if len(o.fragmentViolation) > 0 {
			return Fail, strings.Join(o.fragmentViolation, "; ")
		}
		if o.fragmented == 0 {
			return Skip, "the server fragmented no response"
		}
		return Pass, fmt.Sprintf("%d fragmented responses", o.fragmented)
	}},
}

// ---- checks ----

func probeEcho(t *T) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	if err := c.send(must(frame.AppendRequestResponse(nil, 1, 0, nil, []byte("tck-probe")))); err != nil {
		return Fail, err.Error()
	}
	r, err := t.awaitStream(c, 1, t.left())
	switch {
	case err != nil:
		return Fail, "request-response: " + err.Error()
	case r.err != nil:
		return Fail, fmt.Sprintf("request-response got ERROR[%v] %q", r.err.Code, r.err.Message())
	case string(r.data) != "tck-probe":
		return Fail, fmt.Sprintf("request-response answered %q to %q", r.data, "tck-probe")
	}
	if err := c.send(must(frame.AppendRequestStream(nil, 3, 0, 10, nil, []byte("3")))); err != nil {
		return Fail, err.Error()
	}
	got, complete, e, err := t.items(c, 3, t.left())
	switch {
	case err != nil:
		return Fail, "request-stream: " + err.Error()
	case e != nil:
		return Fail, fmt.Sprintf("request-stream \"3\" got ERROR[%v] %q", e.Code, e.Message())
	case !equal(got, seq(0, 3)) || !complete:
		return Fail, fmt.Sprintf("request-stream \"3\" gave %v complete=%v, want [0 1 2] and complete", got, complete)
	}
	return Pass, "request-response echoes, request-stream \"3\" gives 0 1 2"
}

// refused runs a first exchange that must end in ERROR[want...] on stream
// 0, followed by the close when mustClose.
func refused(t *T, c *raw, what string, mustClose bool, want ...frame.ErrorCode) (Status, string) {
	e, err := t.awaitConnError(c)
	if errors.Is(err, errTimeout) {
		if t.aliveWithin(c, t.rest()) == nil {
			return Fail, fmt.Sprintf("%s: no ERROR, and the connection goes on (it answers KEEPALIVE)", what)
		}
		return Fail, fmt.Sprintf("%s: no ERROR within %v", what, t.left().Round(time.Second))
	}
	if err != nil {
		return Fail, fmt.Sprintf("%s: closed without ERROR (%v)", what, err)
	}
	ok := false
	for _, w := range want {
		ok = ok || e.code == w
	}
	if !ok {
		return Fail, fmt.Sprintf("%s: %v", what, e)
	}
	if !mustClose {
		return Pass, e.Error()
	}
	if st, d := closes(t, c); st != Pass {
		return st, fmt.Sprintf("%s: %v, but %s", what, e, d)
	}
	return Pass, fmt.Sprintf("%v, then closed", e)
}

// closes checks the server closes the connection (within the check's time).
func closes(t *T, c *raw) (Status, string) {
	for {
		_, err := c.next(t.rest())
		if errors.Is(err, errClosed) {
			return Pass, ""
		}
		if err != nil {
			return Fail, "the connection stayed open"
		}
	}
}

func setupFirst(t *T) (Status, string) {
	c, err := t.dial()
	if err != nil {
		return Fail, err.Error()
	}
	_ = c.send(must(frame.AppendRequestResponse(nil, 1, 0, nil, []byte("before setup"))))
	return refused(t, c, "REQUEST_RESPONSE first", true, frame.ErrorCodeInvalidSetup)
}

func setupStreamID(t *T) (Status, string) {
	c, err := t.dial()
	if err != nil {
		return Fail, err.Error()
	}
	_ = c.send(withStream(t.setup(nil), 1))
	return refused(t, c, "SETUP on stream 1", true, frame.ErrorCodeInvalidSetup)
}

// afterSetup sends a changed SETUP and returns the server's verdict:
// accepted (nil, nil: a KEEPALIVE came back), refused (*connErr), or err.
func afterSetup(t *T, mod func(*frame.Setup)) (*connErr, error) {
	c, err := t.dial()
	if err != nil {
		return nil, err
	}
	if err := c.send(t.setup(mod)); err != nil {
		return nil, err
	}
	err = t.alive(c)
	var ce *connErr
	if errors.As(err, &ce) {
		return ce, nil
	}
	return nil, err
}

func setupVersion(t *T) (Status, string) {
	e, err := afterSetup(t, func(s *frame.Setup) { s.MajorVersion, s.MinorVersion = 99, 0 })
	switch {
	case err != nil:
		return Fail, "SETUP 99.0: " + err.Error()
	case e == nil:
		return Fail, "SETUP 99.0 was accepted"
	case e.code == frame.ErrorCodeInvalidSetup || e.code == frame.ErrorCodeUnsupportedSetup:
		return Pass, e.Error()
	case e.code == frame.ErrorCodeRejectedSetup:
		return Warn, e.Error() + " (the rule names INVALID_SETUP or UNSUPPORTED_SETUP)"
	}
	return Fail, "SETUP 99.0: " + e.Error()
}

func setupResume(t *T) (Status, string) {
	e, err := afterSetup(t, func(s *frame.Setup) { s.ResumeToken = []byte("sluice-tck-resume-token") })
	switch {
	case err != nil:
		return Fail, "SETUP with R: " + err.Error()
	case e == nil:
		return Skip, "SETUP with R was accepted: the server supports resumption"
	case e.code == frame.ErrorCodeRejectedSetup:
		return Pass, e.Error()
	case e.code == frame.ErrorCodeUnsupportedSetup:
		// Protocol.md disagrees with itself: the SETUP section says
		// REJECTED_SETUP, Connection Establishment allows UNSUPPORTED_SETUP
		// for any SETUP the server does not accept.
		return Pass, e.Error() + " (the SETUP section says REJECTED_SETUP; Connection Establishment allows this)"
	}
	return Fail, "SETUP with R: " + e.Error()
}

func resumeUnknown(t *T) (Status, string) {
	c, err := t.dial()
	if err != nil {
		return Fail, err.Error()
	}
	_ = c.send(must(frame.AppendResume(nil, frame.ProtocolMajor, frame.ProtocolMinor, []byte("sluice-tck-unknown-token"), 0, 0)))
	return refused(t, c, "RESUME with an unknown token", false, frame.ErrorCodeRejectedResume)
}

func setupLease(t *T) (Status, string) {
	c, err := t.dial()
	if err != nil {
		return Fail, err.Error()
	}
	_ = c.send(t.setup(func(s *frame.Setup) { s.Flags |= frame.FlagLease }))
	for {
		f, err := c.next(t.left())
		if errors.Is(err, errTimeout) {
			return Fail, fmt.Sprintf("neither LEASE nor ERROR within %v after SETUP with L", t.cfg.Timeout)
		}
		if err != nil {
			return Fail, fmt.Sprintf("closed without LEASE or ERROR (%v)", err)
		}
		h, _ := frame.ParseHeader(f)
		switch {
		case h.Type == frame.TypeLease:
			l, err := frame.ParseLease(f)
			if err != nil {
				return Fail, "malformed LEASE: " + err.Error()
			}
			if l.TTL == 0 || l.NumberOfRequests == 0 || h.StreamID != 0 {
				return Fail, fmt.Sprintf("LEASE on stream %d with TTL %d ms, %d requests (both MUST be > 0, stream 0)", h.StreamID, l.TTL, l.NumberOfRequests)
			}
			return Pass, fmt.Sprintf("LEASE TTL %d ms, %d requests", l.TTL, l.NumberOfRequests)
		case h.Type == frame.TypeError && h.StreamID == 0:
			e, _ := frame.ParseError(f)
			switch e.Code {
			case frame.ErrorCodeRejectedSetup, frame.ErrorCodeUnsupportedSetup, frame.ErrorCodeInvalidSetup:
				return Skip, fmt.Sprintf("the server does not do lease: ERROR[%v] %q", e.Code, e.Message())
			}
			return Fail, fmt.Sprintf("ERROR[%v] %q after SETUP with L", e.Code, e.Message())
		}
	}
}

func keepaliveEcho(t *T) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	if err := t.alive(c); err != nil {
		return Fail, err.Error()
	}
	return Pass, "echoed without R, same data"
}

// ignored sends fs after SETUP and checks the connection still answers.
func ignored(t *T, what string, fs ...[]byte) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	if err := c.send(fs...); err != nil {
		return Fail, err.Error()
	}
	if err := t.alive(c); err != nil {
		return Fail, what + ": " + err.Error()
	}
	return Pass, what + ": the connection goes on"
}

func ignoreCancel(t *T) (Status, string) {
	return ignored(t, "CANCEL on streams 77 and 0",
		must(frame.AppendCancel(nil, 77)), withStream(must(frame.AppendCancel(nil, 1)), 0))
}

func ignorePayload(t *T) (Status, string) {
	return ignored(t, "PAYLOAD on streams 79 and 0",
		must(frame.AppendPayload(nil, 79, frame.FlagNext|frame.FlagComplete, nil, []byte("x"))),
		withStream(must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, []byte("x"))), 0))
}

func ignoreError(t *T) (Status, string) {
	return ignored(t, "ERROR on stream 81", must(frame.AppendError(nil, 81, frame.ErrorCodeApplicationError, "tck")))
}

func ignoreMetadataPush(t *T) (Status, string) {
	return ignored(t, "METADATA_PUSH on stream 3", withStream(must(frame.AppendMetadataPush(nil, []byte("tck"))), 3))
}

func ignoreSetupAgain(t *T) (Status, string) {
	return ignored(t, "a second SETUP", t.setup(nil))
}

func ignoreSetupErrors(t *T) (Status, string) {
	var fs [][]byte
	for _, code := range []frame.ErrorCode{frame.ErrorCodeInvalidSetup, frame.ErrorCodeUnsupportedSetup, frame.ErrorCodeRejectedSetup, frame.ErrorCodeRejectedResume} {
		fs = append(fs, must(frame.AppendError(nil, 0, code, "tck")))
	}
	return ignored(t, "the four SETUP/RESUME error codes on stream 0", fs...)
}

func ignoreRequestInUse(t *T) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	_ = c.send(must(frame.AppendRequestStream(nil, 1, 0, 1, nil, []byte("3"))))
	got, _, e, err := t.items(c, 1, t.cfg.Quiet)
	if err != nil || e != nil || !equal(got, seq(0, 1)) {
		return Fail, fmt.Sprintf("REQUEST_STREAM \"3\" n=1: got %v, ERROR %v, %v", got, e, err)
	}
	_ = c.send(must(frame.AppendRequestResponse(nil, 1, 0, nil, []byte("tck-duplicate"))),
		must(frame.AppendRequestN(nil, 1, 2)))
	got, complete, e, err := t.items(c, 1, t.left())
	switch {
	case err != nil:
		return Fail, err.Error()
	case e != nil:
		return Fail, fmt.Sprintf("the duplicate request ended the stream: ERROR[%v] %q", e.Code, e.Message())
	case !equal(got, seq(1, 3)) || !complete:
		return Fail, fmt.Sprintf("after a REQUEST_RESPONSE on the live stream: got %v complete=%v, want [1 2] and complete", got, complete)
	}
	return Pass, "REQUEST_RESPONSE on the live stream 1 was ignored; the stream went on"
}

func ignoreUnknownFlags(t *T) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	_ = c.send(must(frame.AppendRequestResponse(nil, 1, frame.FlagNext|frame.FlagComplete, nil, []byte("tck-flags"))))
	r, err := t.awaitStream(c, 1, t.left())
	switch {
	case err != nil:
		return Fail, err.Error()
	case r.err != nil:
		return Fail, fmt.Sprintf("ERROR[%v] %q", r.err.Code, r.err.Message())
	case string(r.data) != "tck-flags":
		return Fail, fmt.Sprintf("answered %q", r.data)
	}
	return Pass, "answered as without the flags"
}

func extIgnore(t *T) (Status, string) {
	return ignored(t, "EXT with I, extended type 0x7FFF0001, on streams 0 and 5",
		must(frame.AppendExt(nil, 0, frame.FlagIgnore, 0x7FFF0001, nil, []byte("tck"))),
		must(frame.AppendExt(nil, 5, frame.FlagIgnore, 0x7FFF0001, nil, []byte("tck"))))
}

const unknownType = 0x30

func unknownTypeIgnore(t *T) (Status, string) {
	return ignored(t, "frame type 0x30 with I", rawFrame(0, unknownType, frame.FlagIgnore, []byte("tck")))
}

func unknownTypeNoIgnore(t *T) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	_ = c.send(rawFrame(0, unknownType, 0, []byte("tck")))
	err = t.alive(c)
	var ce *connErr
	switch {
	case err == nil:
		return Pass, "ignored (the spec allows it)"
	case errors.As(err, &ce) && ce.code == frame.ErrorCodeConnectionError:
		return Pass, ce.Error()
	case errors.As(err, &ce):
		return Warn, ce.Error() + " (the rule names CONNECTION_ERROR)"
	}
	return Warn, err.Error() + " (without ERROR[CONNECTION_ERROR])"
}

func metadataLength(t *T) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	// REQUEST_RESPONSE with M, a metadata length of 65535 and 3 bytes.
	_ = c.send(rawFrame(1, uint8(frame.TypeRequestResponse), frame.FlagMetadata, []byte{0, 0xFF, 0xFF, 'a', 'b', 'c'}))
	var seen []string
	for {
		f, err := c.next(t.left())
		if errors.Is(err, errTimeout) {
			what := "nothing"
			if len(seen) > 0 {
				what = strings.Join(seen, ", ")
			}
			if t.aliveWithin(c, t.rest()) == nil {
				return Fail, fmt.Sprintf("no ERROR on stream 0 (got %s) and the connection goes on", what)
			}
			return Fail, fmt.Sprintf("no ERROR on stream 0 (got %s)", what)
		}
		if err != nil {
			return Fail, fmt.Sprintf("closed without ERROR (%v)", err)
		}
		h, _ := frame.ParseHeader(f)
		if h.Type != frame.TypeError || h.StreamID != 0 {
			d := fmt.Sprintf("%v on stream %d", h.Type, h.StreamID)
			if h.Type == frame.TypeError {
				e, _ := frame.ParseError(f)
				d = fmt.Sprintf("ERROR[%v] %q on stream %d", e.Code, e.Message(), h.StreamID)
			}
			seen = append(seen, d)
			continue
		}
		e, _ := frame.ParseError(f)
		if e.Code != frame.ErrorCodeConnectionError {
			return Fail, fmt.Sprintf("ERROR[%v] %q on stream 0", e.Code, e.Message())
		}
		if st, d := closes(t, c); st != Pass {
			return st, fmt.Sprintf("ERROR[%v] %q on stream 0, but %s", e.Code, e.Message(), d)
		}
		return Pass, fmt.Sprintf("ERROR[%v] %q on stream 0, then closed", e.Code, e.Message())
	}
}

// want collects elements of stream id for a quiet period and compares.
func want(t *T, c *raw, id uint32, what string, w []string, complete bool) (Status, string, bool) {
	got, done, e, err := t.items(c, id, t.cfg.Quiet)
	switch {
	case err != nil:
		return Fail, what + ": " + err.Error(), false
	case e != nil:
		return Fail, fmt.Sprintf("%s: ERROR[%v] %q", what, e.Code, e.Message()), false
	case len(got) > len(w):
		return Fail, fmt.Sprintf("%s: %d elements %s, %d granted", what, len(got), short(got), len(w)), false
	case !equal(got, w) || done != complete:
		return Fail, fmt.Sprintf("%s: got %s complete=%v, want %s complete=%v", what, short(got), done, short(w), complete), false
	}
	return Pass, "", true
}

func requestNExact(t *T) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	_ = c.send(must(frame.AppendRequestStream(nil, 1, 0, 3, nil, []byte("10"))))
	if st, d, ok := want(t, c, 1, "REQUEST_STREAM \"10\" n=3", seq(0, 3), false); !ok {
		return st, d
	}
	_ = c.send(must(frame.AppendRequestN(nil, 1, 2)))
	if st, d, ok := want(t, c, 1, "REQUEST_N 2", seq(3, 5), false); !ok {
		return st, d
	}
	_ = c.send(must(frame.AppendRequestN(nil, 1, 5)))
	if st, d, ok := want(t, c, 1, "REQUEST_N 5", seq(5, 10), true); !ok {
		return st, d
	}
	return Pass, fmt.Sprintf("3, 2, 5 elements as granted, each batch checked for %v of silence", t.cfg.Quiet)
}

func requestNZero(t *T) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	_ = c.send(must(frame.AppendRequestStream(nil, 1, 0, 2, nil, []byte("5"))))
	if st, d, ok := want(t, c, 1, "REQUEST_STREAM \"5\" n=2", seq(0, 2), false); !ok {
		return st, d
	}
	_ = c.send(rawFrame(1, uint8(frame.TypeRequestN), 0, []byte{0, 0, 0, 0}))
	got, _, e, err := t.items(c, 1, t.cfg.Quiet)
	var ce *connErr
	switch {
	case errors.As(err, &ce):
		return Pass, "answered " + ce.Error()
	case err != nil:
		return Fail, err.Error()
	case len(got) > 0:
		return Fail, fmt.Sprintf("REQUEST_N 0 was taken as credits: got %s", short(got))
	case e != nil:
		return Pass, fmt.Sprintf("answered ERROR[%v] %q on the stream", e.Code, e.Message())
	}
	_ = c.send(must(frame.AppendRequestN(nil, 1, 3)))
	if st, d, ok := want(t, c, 1, "REQUEST_N 3 after REQUEST_N 0", seq(2, 5), true); !ok {
		return st, d
	}
	return Pass, "ignored; the stream went on with later credits"
}

func requestNMax(t *T) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	_ = c.send(must(frame.AppendRequestStream(nil, 1, 0, frame.MaxRequestN, nil, []byte("50"))),
		must(frame.AppendRequestN(nil, 1, frame.MaxRequestN)))
	got, complete, e, err := t.items(c, 1, t.left())
	switch {
	case err != nil:
		return Fail, err.Error()
	case e != nil:
		return Fail, fmt.Sprintf("ERROR[%v] %q", e.Code, e.Message())
	case !equal(got, seq(0, 50)) || !complete:
		return Fail, fmt.Sprintf("got %s complete=%v, want 0..49 and complete", short(got), complete)
	}
	return Pass, "REQUEST_STREAM n=2^31-1 then REQUEST_N 2^31-1: 50 elements and complete"
}

func cancelStops(t *T) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	_ = c.send(must(frame.AppendRequestStream(nil, 1, 0, 3, nil, []byte("1000000"))))
	if st, d, ok := want(t, c, 1, "REQUEST_STREAM \"1000000\" n=3", seq(0, 3), false); !ok {
		return st, d
	}
	_ = c.send(must(frame.AppendCancel(nil, 1)), must(frame.AppendRequestN(nil, 1, 100)))
	got, _, e, err := t.items(c, 1, t.cfg.Quiet)
	switch {
	case err != nil:
		return Fail, err.Error()
	case len(got) > 0:
		return Fail, fmt.Sprintf("after CANCEL and REQUEST_N 100: %d more elements %s", len(got), short(got))
	case e != nil:
		return Warn, fmt.Sprintf("ERROR[%v] %q after CANCEL (the stream is terminated: nothing should be sent)", e.Code, e.Message())
	}
	if err := t.alive(c); err != nil {
		return Fail, "after CANCEL: " + err.Error()
	}
	return Pass, fmt.Sprintf("nothing within %v after CANCEL and REQUEST_N 100", t.cfg.Quiet)
}

func channelRequestN(t *T) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	_ = c.send(must(frame.AppendRequestChannel(nil, 1, 0, 10, nil, []byte("a"))))
	var echoed []string
	for {
		f, err := c.next(t.left())
		if errors.Is(err, errTimeout) {
			return Fail, fmt.Sprintf("no REQUEST_N on the channel within %v", t.cfg.Timeout)
		}
		if err != nil {
			return Fail, err.Error()
		}
		h, _ := frame.ParseHeader(f)
		if h.StreamID != 1 {
			continue
		}
		if h.Type == frame.TypePayload {
			p, _ := frame.ParsePayload(f)
			echoed = append(echoed, string(p.Data))
			continue
		}
		if h.Type == frame.TypeError {
			e, _ := frame.ParseError(f)
			return Fail, fmt.Sprintf("ERROR[%v] %q instead of REQUEST_N", e.Code, e.Message())
		}
		if h.Type == frame.TypeRequestN {
			break
		}
	}
	_ = c.send(must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, []byte("b"))),
		must(frame.AppendPayload(nil, 1, frame.FlagComplete, nil, nil)))
	got, complete, e, err := t.items(c, 1, t.left())
	got = append(echoed, got...)
	switch {
	case err != nil:
		return Fail, err.Error()
	case e != nil:
		return Fail, fmt.Sprintf("ERROR[%v] %q", e.Code, e.Message())
	case !equal(got, []string{"a", "b"}) || !complete:
		return Fail, fmt.Sprintf("echo of a, b: got %v complete=%v", got, complete)
	}
	return Pass, "REQUEST_N first; then a, b echoed and completed"
}

func fragmentedRequest(t *T) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	md := bytes.Repeat([]byte("m"), 1000)
	data := make([]byte, 100000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	_ = c.send(must(frame.AppendRequestResponse(nil, 1, frame.FlagFollows, md[:600], nil)),
		must(frame.AppendPayload(nil, 1, frame.FlagFollows|frame.FlagNext, md[600:], data[:40000])),
		must(frame.AppendPayload(nil, 1, frame.FlagNext, nil, data[40000:])))
	r, err := t.awaitStream(c, 1, t.left())
	switch {
	case err != nil:
		return Fail, err.Error()
	case r.err != nil:
		return Fail, fmt.Sprintf("ERROR[%v] %q", r.err.Code, r.err.Message())
	case !bytes.Equal(r.md, md) || !bytes.Equal(r.data, data):
		why := ""
		if r.followsComplete {
			why = ": the response's fragment had F and C, and F is ignored when C is set (\"Handling the Unexpected\"), so the payload ended there"
		}
		return Fail, fmt.Sprintf("echo of %d+%d bytes came back as %d+%d bytes, or different%s", len(md), len(data), len(r.md), len(r.data), why)
	}
	return Pass, "1,000 B metadata + 100,000 B data in 3 fragments echoed intact"
}

func fnfNoResponse(t *T) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	_ = c.send(must(frame.AppendRequestFNF(nil, 1, 0, nil, []byte("tck-fnf"))))
	r, err := t.awaitStream(c, 1, t.cfg.Quiet)
	switch {
	case err == nil && r.err != nil:
		return Fail, fmt.Sprintf("ERROR[%v] %q on the fire-and-forget stream", r.err.Code, r.err.Message())
	case err == nil:
		return Fail, fmt.Sprintf("a PAYLOAD %q on the fire-and-forget stream", r.data)
	case !errors.Is(err, errTimeout):
		return Fail, err.Error()
	}
	if err := t.alive(c); err != nil {
		return Fail, err.Error()
	}
	return Pass, fmt.Sprintf("nothing on the stream within %v", t.cfg.Quiet)
}

func metadataPush(t *T) (Status, string) {
	return ignored(t, "METADATA_PUSH on stream 0", must(frame.AppendMetadataPush(nil, []byte("tck-push"))))
}

func applicationError(t *T) (Status, string) {
	c, err := t.open()
	if err != nil {
		return Fail, err.Error()
	}
	_ = c.send(must(frame.AppendRequestResponse(nil, 1, 0, nil, []byte("error:tck boom"))))
	r, err := t.awaitStream(c, 1, t.left())
	switch {
	case err != nil:
		return Fail, err.Error()
	case r.err == nil:
		return Fail, fmt.Sprintf("a PAYLOAD %q instead of ERROR", r.data)
	case r.err.Code != frame.ErrorCodeApplicationError:
		return Fail, fmt.Sprintf("ERROR[%v] %q", r.err.Code, r.err.Message())
	case r.err.Message() != "tck boom":
		return Warn, fmt.Sprintf("ERROR[APPLICATION_ERROR] with message %q, the echo contract says %q", r.err.Message(), "tck boom")
	}
	return Pass, "ERROR[APPLICATION_ERROR] \"tck boom\""
}
