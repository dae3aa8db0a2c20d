package collect

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/telemetry"
)

// serveRemoteWrite answers POST /api/v1/write: 204 once the request's
// records are fsynced; 400 only for a body that is not a snappy-compressed
// WriteRequest (Prometheus drops a request answered 4xx); 413 for a body
// over the bound or a time series over --max-record; 415 for another
// Content-Encoding than snappy or a Content-Type naming another message
// (remote-write 2.0); 503 with Retry-After
// when the spool is full or failing (Prometheus retries 5xx; it drops
// 429 unless told otherwise, so 429 is not used here).
func (rc *Receiver) serveRemoteWrite(w http.ResponseWriter, r *http.Request) {
	const endpoint = "remote-write"
	if !rc.authorized(w, r, func(status int, err error) {
		rc.count(endpoint, strconv.Itoa(status))
		http.Error(w, err.Error(), status)
	}) {
		return
	}
	status, err := rc.remoteWrite(w, r)
	rc.count(endpoint, strconv.Itoa(status))
	if err != nil {
		setRetryAfter(w, status)
		if status >= 500 {
			rc.log.Warn("remote-write not spooled", "status", status, "err", err)
		}
		http.Error(w, err.Error(), status)
		return
	}
	w.WriteHeader(status)
}

func (rc *Receiver) remoteWrite(w http.ResponseWriter, r *http.Request) (int, error) {
	if err := remoteWrite1(r.Header.Get("Content-Type")); err != nil {
		return http.StatusUnsupportedMediaType, err
	}
	body, status, err := readSnappy(w, r, rc.bodyLimits())
	if err != nil {
		return status, err
	}
	if _, err := checkWriteRequest(body); err != nil {
		return http.StatusBadRequest, err
	}
	records, err := splitRecords(body, telemetry.RemoteWrite, rc.cfg.MaxRecordBytes)
	if err != nil {
		return httpStatusFor(err, http.StatusServiceUnavailable), err
	}
	if err := rc.spool(r.Context(), telemetry.RemoteWrite.String(), records); err != nil {
		return spoolErrStatus(err, http.StatusServiceUnavailable), err
	}
	return http.StatusNoContent, nil
}

// remoteWrite1 refuses a Content-Type naming another message than
// remote-write 1.0's: a remote-write 2.0 sender (proto=
// io.prometheus.write.v2.Request) falls back to 1.0 on a 415, as that
// spec asks, where its body would otherwise pass for a 1.0 one with
// unknown fields and be stored as one.
func remoteWrite1(ct string) error {
	if ct == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/x-protobuf" {
		return fmt.Errorf("Content-Type %q: remote-write bodies are application/x-protobuf", ct)
	}
	if p, ok := params["proto"]; ok && p != "prometheus.WriteRequest" {
		return fmt.Errorf("Content-Type %q: only remote-write 1.0 (prometheus.WriteRequest) is served", ct)
	}
	return nil
}

// httpStatusFor is 400 for errMalformed, else the spool's status.
func httpStatusFor(err error, full int) int {
	if errors.Is(err, errMalformed) {
		return http.StatusBadRequest
	}
	return spoolErrStatus(err, full)
}

// serveOTLP answers POST to an OTLP/HTTP path, as the OTLP spec says:
// 200 with an empty Export…ServiceResponse (nothing is partly refused:
// a request is spooled whole or not at all) in the request's encoding;
// on failure a google.rpc.Status in that encoding, with 400 for a
// malformed body, 413 for one over the bound or a resource over
// --max-record, 415 for an unknown Content-Type or Content-Encoding,
// 429 with Retry-After when the spool's quota is reached and 503 with
// Retry-After when it is failing or the agent is stopping (the OTLP
// exporters retry 429 and 503 only).
func (rc *Receiver) serveOTLP(s signal, w http.ResponseWriter, r *http.Request) {
	isJSON, err := otlpContentType(r.Header.Get("Content-Type"))
	if !rc.authorized(w, r, func(status int, err error) {
		rc.count(s.path, strconv.Itoa(status))
		writeOTLPError(w, isJSON, status, err)
	}) {
		return
	}
	if err != nil {
		rc.count(s.path, strconv.Itoa(http.StatusUnsupportedMediaType))
		writeOTLPError(w, false, http.StatusUnsupportedMediaType, err)
		return
	}
	status, err := rc.otlp(s, w, r, isJSON)
	rc.count(s.path, strconv.Itoa(status))
	if err != nil {
		if status >= 500 {
			rc.log.Warn("OTLP request not spooled", "path", s.path, "status", status, "err", err)
		}
		setRetryAfter(w, status)
		writeOTLPError(w, isJSON, status, err)
		return
	}
	writeOTLP(w, isJSON, status, s.newResp())
}

func (rc *Receiver) otlp(s signal, w http.ResponseWriter, r *http.Request, isJSON bool) (int, error) {
	body, status, err := readGzip(w, r, rc.bodyLimits())
	if err != nil {
		return status, err
	}
	if body, err = decodeOTLP(s, body, isJSON); err != nil {
		return http.StatusBadRequest, err
	}
	records, err := splitRecords(body, s.kind, rc.cfg.MaxRecordBytes)
	if err != nil {
		return httpStatusFor(err, http.StatusTooManyRequests), err
	}
	if err := rc.spool(r.Context(), s.kind.String(), records); err != nil {
		return spoolErrStatus(err, http.StatusTooManyRequests), err
	}
	return http.StatusOK, nil
}

// otlpContentType tells a JSON body from a protobuf one; anything else
// is an error (415).
func otlpContentType(ct string) (isJSON bool, err error) {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false, errors.New("Content-Type missing or malformed: send application/x-protobuf or application/json")
	}
	switch mt {
	case "application/x-protobuf":
		return false, nil
	case "application/json":
		return true, nil
	}
	return false, errors.New("Content-Type " + mt + " not supported: send application/x-protobuf or application/json")
}

// writeOTLPError answers status with a google.rpc.Status, as OTLP/HTTP
// asks of every 4xx and 5xx.
func writeOTLPError(w http.ResponseWriter, isJSON bool, httpStatus int, err error) {
	writeOTLP(w, isJSON, httpStatus, &status.Status{Code: int32(rpcCodeFor(httpStatus)), Message: err.Error()})
}

func writeOTLP(w http.ResponseWriter, isJSON bool, code int, m proto.Message) {
	var b []byte
	if isJSON {
		b, _ = protojson.Marshal(m)
		w.Header().Set("Content-Type", "application/json")
	} else {
		b, _ = proto.Marshal(m)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}
	w.WriteHeader(code)
	w.Write(b)
}

// rpcCodeFor is the google.rpc.Code that means what an HTTP status of
// ours does (the code field of google.rpc.Status).
func rpcCodeFor(httpStatus int) code.Code {
	switch httpStatus {
	case http.StatusBadRequest, http.StatusUnsupportedMediaType, http.StatusRequestEntityTooLarge:
		return code.Code_INVALID_ARGUMENT
	case http.StatusTooManyRequests:
		return code.Code_RESOURCE_EXHAUSTED
	case http.StatusUnauthorized:
		return code.Code_UNAUTHENTICATED
	case http.StatusMethodNotAllowed:
		return code.Code_UNIMPLEMENTED
	case http.StatusRequestTimeout:
		return code.Code_DEADLINE_EXCEEDED
	}
	return code.Code_UNAVAILABLE
}
