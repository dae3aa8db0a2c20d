package telemetry

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestRoundTrip(t *testing.T) {
	for _, k := range []Kind{RemoteWrite, OTLPMetrics, OTLPLogs, OTLPTraces} {
		rec := Append(nil, k, []byte("body"))
		got, body, err := Decode(rec)
		if err != nil || got != k || !bytes.Equal(body, []byte("body")) {
			t.Fatalf("%v: Decode = %v %q %v", k, got, body, err)
		}
	}
}

// scrapeRequest is a remote-write WriteRequest of n series of one
// sample each, as Prometheus' marshaller lays it out.
func scrapeRequest(n int) []byte {
	var req []byte
	for i := range n {
		var series []byte
		for _, l := range [][2]string{{"__name__", "up"}, {"job", fmt.Sprint("job-", i)}} {
			lbl := protowire.AppendTag(nil, 1, protowire.BytesType)
			lbl = protowire.AppendString(lbl, l[0])
			lbl = protowire.AppendTag(lbl, 2, protowire.BytesType)
			lbl = protowire.AppendString(lbl, l[1])
			series = protowire.AppendTag(series, 1, protowire.BytesType)
			series = protowire.AppendBytes(series, lbl)
		}
		smp := protowire.AppendTag(nil, 1, protowire.Fixed64Type)
		smp = protowire.AppendFixed64(smp, math.Float64bits(float64(i)+0.25))
		smp = protowire.AppendTag(smp, 2, protowire.VarintType)
		smp = protowire.AppendVarint(smp, 1764290000000)
		series = protowire.AppendTag(series, 2, protowire.BytesType)
		series = protowire.AppendBytes(series, smp)
		req = protowire.AppendTag(req, 1, protowire.BytesType)
		req = protowire.AppendBytes(req, series)
	}
	return req
}

// AppendRemoteWrite stores a request the columnar encoding carries as a
// RemoteWriteColumns record, shorter, which Decode returns as the
// RemoteWrite request it was; one it does not carry (here: with
// metadata) as a plain RemoteWrite record; a damaged columnar record is
// an error, not ErrNotMarked.
func TestAppendRemoteWrite(t *testing.T) {
	body := scrapeRequest(50)
	rec := AppendRemoteWrite(nil, body)
	if Kind(rec[len(Magic)+1]) != RemoteWriteColumns || len(rec) >= HeaderLen+len(body) {
		t.Fatalf("record of kind %d, %d bytes for a %d-byte body", rec[len(Magic)+1], len(rec), len(body))
	}
	if k, got, err := Decode(rec); err != nil || k != RemoteWrite || !bytes.Equal(got, body) {
		t.Fatalf("Decode = %v, %v; want the request back as %v", k, err, RemoteWrite)
	}
	withMetadata := append(scrapeRequest(50), 0x1a, 0x00) // WriteRequest.metadata, empty
	if got := AppendRemoteWrite(nil, withMetadata); !bytes.Equal(got, Append(nil, RemoteWrite, withMetadata)) {
		t.Fatalf("a request with metadata stored as %x", got)
	}
	if _, _, err := Decode(rec[:len(rec)-1]); err == nil || errors.Is(err, ErrNotMarked) {
		t.Fatalf("a damaged columnar record: %v", err)
	}
}

func TestPlainAndBadRecords(t *testing.T) {
	for _, rec := range [][]byte{nil, []byte("plain text"), []byte(Magic), []byte("\xffSL")} {
		if _, _, err := Decode(rec); !errors.Is(err, ErrNotMarked) {
			t.Errorf("Decode(%q) = %v, want ErrNotMarked", rec, err)
		}
	}
	for _, rec := range [][]byte{
		append([]byte(Magic), 2, byte(RemoteWrite)), // a later version
		append([]byte(Magic), 1, 0),                 // kind 0
		append([]byte(Magic), 1, 9),                 // unknown kind
	} {
		if _, _, err := Decode(rec); err == nil || errors.Is(err, ErrNotMarked) {
			t.Errorf("Decode(%q) = %v, want a version or kind error", rec, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, RemoteWrite, []byte{1, 2, 3}))
	f.Add([]byte("plain"))
	f.Add(AppendRemoteWrite(nil, scrapeRequest(20)))
	f.Fuzz(func(t *testing.T, rec []byte) {
		k, body, err := Decode(rec)
		if err != nil {
			return
		}
		if rec[len(Magic)+1] == byte(RemoteWriteColumns) {
			// Decoded to the protobuf: storing that again gives it back.
			if _, again, err := Decode(AppendRemoteWrite(nil, body)); err != nil || !bytes.Equal(again, body) {
				t.Fatalf("stored again, %x decodes to %x, %v", body, again, err)
			}
			return
		}
		if again := Append(nil, k, body); !bytes.Equal(again, rec) {
			t.Fatalf("Append(Decode(%x)) = %x", rec, again)
		}
	})
}
