package deadletter

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/seglog"
)

func TestRoundTrip(t *testing.T) {
	at := time.Unix(0, 1_795_000_000_123_456_789)
	for _, l := range []Letter{
		{ID: 7, At: at, Code: "ERROR_CODE_OVERSIZE", Detail: "payload of 5 bytes exceeds 4", Record: []byte("record")},
		{ID: 1<<64 - 1, At: at},
		{ID: 3, At: at, Code: strings.Repeat("c", 300), Detail: strings.Repeat("d", 2000), Record: []byte{0}},
	} {
		got, err := Decode(Append(nil, l))
		if err != nil {
			t.Fatal(err)
		}
		wantCode, wantDetail := l.Code, l.Detail
		if len(wantCode) > 255 {
			wantCode = wantCode[:255]
		}
		if len(wantDetail) > MaxDetail {
			wantDetail = wantDetail[:MaxDetail]
		}
		if got.ID != l.ID || !got.At.Equal(l.At) || got.Code != wantCode || got.Detail != wantDetail || !bytes.Equal(got.Record, l.Record) {
			t.Errorf("round trip of %d: got %+v", l.ID, got)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := Append(nil, Letter{ID: 1, Code: "x", Detail: "y", Record: []byte("r")})
	for name, b := range map[string][]byte{
		"empty":       nil,
		"short":       good[:10],
		"version":     append([]byte{9}, good[1:]...),
		"code cut":    good[:18],
		"detail cut":  good[:21],
		"detail long": append(append([]byte(nil), good[:19]...), 0xff, 0xff),
	} {
		if _, err := Decode(b); !errors.Is(err, ErrBadLetter) {
			t.Errorf("%s: %v, want ErrBadLetter", name, err)
		}
	}
}

// TestReadBesideWriter: Read sees every letter appended, in order, while
// the log is open for appending (the agent runs); a directory that does
// not exist holds none.
func TestReadBesideWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Dir)
	if err := Read(dir, func(Letter) error { t.Fatal("a letter in no log"); return nil }); err != nil {
		t.Fatal(err)
	}
	l, err := seglog.Open(dir, seglog.WithSync(seglog.SyncNone()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 3 {
		if _, err := l.Append([][]byte{Append(nil, Letter{ID: uint64(10 + i), Code: "c", Record: []byte{byte(i)}})}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []uint64
	if err := Read(dir, func(l Letter) error { ids = append(ids, l.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 || ids[0] != 10 || ids[2] != 12 {
		t.Errorf("read ids %v, want 10 11 12", ids)
	}
	if _, err := l.Append([][]byte{[]byte("no letter")}); err != nil {
		t.Fatal(err)
	}
	if err := Read(dir, func(Letter) error { return nil }); !errors.Is(err, ErrBadLetter) {
		t.Errorf("a record that is no letter: %v, want ErrBadLetter", err)
	}
}

// FuzzDecode: Decode never panics, and what it accepts encodes back to
// the same bytes when its fields are within the limits Append keeps.
func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, Letter{ID: 1, At: time.Unix(1, 2), Code: "ERROR_CODE_BAD_PAYLOAD", Detail: "not a batch", Record: []byte("rec")}))
	f.Add(Append(nil, Letter{}))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := Decode(b)
		if err != nil {
			return
		}
		if again := Append(nil, l); !bytes.Equal(again, b) {
			t.Fatalf("decoded %+v re-encodes to %x, not %x", l, again, b)
		}
	})
}
