package s3store

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/xfer"
)

// Any bytes as a tail object: an error, or a tail whose hash state
// restores and which encodes back to the same bytes; never a panic.
func FuzzTail(f *testing.F) {
	h := sha256.New()
	h.Write([]byte("abc"))
	f.Add((&tail{After: 3, Hash: marshalHash(h), Data: []byte("tail bytes")}).encode())
	f.Add((&tail{Hash: marshalHash(sha256.New())}).encode())
	f.Add([]byte{0, 0, 0, 1, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		tl, err := decodeTail(b)
		if err != nil {
			return
		}
		if tl.After < 0 {
			t.Fatalf("negative part %d", tl.After)
		}
		if _, err := restoreHash(tl.Hash); err != nil {
			t.Fatalf("decoded a tail whose hash state does not restore: %v", err)
		}
		if !bytes.Equal(tl.encode(), b) {
			t.Fatal("a decoded tail encodes to other bytes")
		}
	})
}

// Any bytes as an info object: an error, or a record that holds the
// invariants an upload relies on (a valid name and id, a part size S3
// takes that reaches the size within its part limit).
func FuzzRecord(f *testing.F) {
	good, _ := json.Marshal(record{ID: "0123abcd", Name: "a.bin", Size: 20 << 20, UploadID: "u1", PartSize: 8 << 20, Created: time.Unix(1, 0)})
	f.Add(good)
	f.Add([]byte(`{"id":"x","name":"../x","size":1,"upload_id":"u","part_size":5242880}`))
	f.Add([]byte(`{"id":"x","name":"a","size":1e18,"upload_id":"u","part_size":5242880}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		if xfer.ValidateName(r.Name) != nil || r.Size < 0 || r.PartSize < minPart ||
			(r.Size+r.PartSize-1)/r.PartSize > maxParts || r.UploadID == "" || r.ID == "" {
			t.Fatalf("decoded a record that breaks the invariants: %+v", r)
		}
	})
}

// The part size grows for files that would need more than S3's 10,000
// parts, and never goes under S3's 5 MiB.
func TestPartSizeFor(t *testing.T) {
	for _, c := range []struct{ size, want, ps int64 }{
		{0, 8 << 20, 8 << 20},
		{1 << 30, 8 << 20, 8 << 20},
		{1 << 30, 1, 5 << 20},
		{200 << 30, 8 << 20, 21 << 20},
	} {
		ps := partSizeFor(c.size, c.want)
		if ps != c.ps || (c.size+ps-1)/ps > maxParts {
			t.Errorf("partSizeFor(%d, %d) = %d, want %d", c.size, c.want, ps, c.ps)
		}
	}
}

// --store URLs: the contract's form, and what it refuses.
func TestParseURL(t *testing.T) {
	l, err := ParseURL("s3://bkt/some/prefix?endpoint=http://127.0.0.1:8333&region=eu-west-1")
	if err != nil || l.Bucket != "bkt" || l.Prefix != "some/prefix/" || l.Endpoint != "http://127.0.0.1:8333" || l.Region != "eu-west-1" {
		t.Fatalf("%+v, %v", l, err)
	}
	l, err = ParseURL("s3://bkt?endpoint=http://h:1")
	if err != nil || l.Prefix != "" || l.Region != "us-east-1" {
		t.Fatalf("%+v, %v", l, err)
	}
	for _, bad := range []string{"s3://bkt", "http://bkt?endpoint=http://h:1", "s3://?endpoint=http://h:1",
		"s3://bkt?endpoint=ftp://h", "s3://bkt?endpoint=http://h:1&color=red"} {
		if _, err := ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) accepted", bad)
		}
	}
}
