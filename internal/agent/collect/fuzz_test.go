package collect

import (
	"bytes"
	"errors"
	"testing"

	"github.com/klauspost/compress/snappy"

	"github.com/sluicehq/sluice/internal/telemetry"
)

// FuzzRemoteWrite: the remote-write decoder (snappy, then the
// WriteRequest check, then the split) never panics, refuses a declared
// size over the bound before allocating it, and a request it accepts
// comes out as records within the limit that concatenate back to it.
func FuzzRemoteWrite(f *testing.F) {
	f.Add(snappy.Encode(nil, writeRequest(series("up", 3), series("x", 1))), 64)
	f.Add(snappy.Encode(nil, []byte{0x0a, 0x02, 0x0a, 0x00}), 1<<20)
	f.Add(snappyBomb(), 100)
	f.Add([]byte("not snappy"), 10)
	f.Fuzz(func(t *testing.T, raw []byte, maxRecord int) {
		maxRecord = telemetry.HeaderLen + 1 + int(uint(maxRecord)%(1<<16))
		body, _, err := decodeSnappy(raw)
		if err != nil {
			return
		}
		if _, err := checkWriteRequest(body); err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("checkWriteRequest: %v is not errMalformed", err)
			}
			return
		}
		checkSplit(t, body, telemetry.RemoteWrite, maxRecord)
	})
}

// FuzzOTLP: the OTLP/HTTP decoder, protobuf and JSON, never panics, and
// what it accepts splits into records that concatenate back to the
// protobuf it stores.
func FuzzOTLP(f *testing.F) {
	f.Add([]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"abababababababababababababababab","body":{"stringValue":"hi"}}]}]}]}`), true, uint8(1), 80)
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"cdcdcdcdcdcdcdcd","parentSpanId":"","name":"s"}]}]}]}`), true, uint8(2), 80)
	f.Add([]byte{0x0a, 0x03, 0x0a, 0x01, 0x00}, false, uint8(0), 1<<20)
	f.Fuzz(func(t *testing.T, body []byte, isJSON bool, which uint8, maxRecord int) {
		maxRecord = telemetry.HeaderLen + 1 + int(uint(maxRecord)%(1<<16))
		s := signals[int(which)%len(signals)]
		out, err := decodeOTLP(s, body, isJSON)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("decodeOTLP: %v is not errMalformed", err)
			}
			return
		}
		checkSplit(t, out, s.kind, maxRecord)
	})
}

// checkSplit: splitRecords either refuses a piece as too large or cuts
// body into records of kind k within maxRecord that concatenate to it.
func checkSplit(t *testing.T, body []byte, k telemetry.Kind, maxRecord int) {
	recs, err := splitRecords(body, k, maxRecord)
	if err != nil {
		return
	}
	var joined []byte
	for _, r := range recs {
		if len(r) > maxRecord {
			t.Fatalf("record of %d bytes, limit %d", len(r), maxRecord)
		}
		got, b, err := telemetry.Decode(r)
		if err != nil || got != k {
			t.Fatalf("record decodes to %v %v", got, err)
		}
		joined = append(joined, b...)
	}
	if !bytes.Equal(joined, body) {
		t.Fatalf("records join to %x, want %x", joined, body)
	}
}
