package telemetry

import (
	"bytes"
	"errors"
	"testing"
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
	f.Fuzz(func(t *testing.T, rec []byte) {
		k, body, err := Decode(rec)
		if err != nil {
			return
		}
		if again := Append(nil, k, body); !bytes.Equal(again, rec) {
			t.Fatalf("Append(Decode(%x)) = %x", rec, again)
		}
	})
}
