package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluicehq/sluice/internal/testkit/s3test"
	"github.com/sluicehq/sluice/internal/xfer"
)

// fixture is a location in the test binary's SeaweedFS, under a prefix
// of the test's own.
type fixture struct {
	t   *testing.T
	loc Location
	c   *s3.Client
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st := s3test.Start(t)
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	loc, err := ParseURL(st.URL(name + "-" + newID()[:6]))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Client(loc)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, loc: loc, c: c}
}

// clock is a test's clock: the real one moved on by skip.
type clock struct{ skip atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.skip.Load())) }
func (c *clock) advance(d time.Duration) { c.skip.Add(int64(d)) }

// server is one Store on the fixture's location, as one `xfer serve`
// process has: its own lease owner id.
func (f *fixture) server(o Options) *Store {
	f.t.Helper()
	return f.serverAt(f.loc, o)
}

func (f *fixture) serverAt(loc Location, o Options) *Store {
	f.t.Helper()
	c, err := Client(loc)
	if err != nil {
		f.t.Fatal(err)
	}
	s, err := Open(loc, c, o)
	if err != nil {
		f.t.Fatalf("Open %s: %v", loc, err)
	}
	f.t.Cleanup(func() { s.Close() })
	return s
}

// object is the object NAME's bytes, or the error of reading it.
func (f *fixture) object(name string) ([]byte, error) {
	key := f.loc.Prefix + name
	out, err := f.c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &f.loc.Bucket, Key: &key})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// multiparts is how many multipart uploads are open under the prefix.
func (f *fixture) multiparts() int {
	out, err := f.c.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: &f.loc.Bucket, Prefix: aws.String(f.loc.Prefix)})
	if err != nil {
		f.t.Fatal(err)
	}
	return len(out.Uploads)
}

// stateObjects is how many objects of uploads' state are under the prefix.
func (f *fixture) stateObjects() int {
	out, err := f.c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &f.loc.Bucket, Prefix: aws.String(f.loc.Prefix + stateDir + "up/")})
	if err != nil {
		f.t.Fatal(err)
	}
	return len(out.Contents)
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sum256(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

// writeChunks writes data[from:to] to u in chunks of n bytes.
func writeChunks(t *testing.T, u xfer.BackendUpload, data []byte, from, to, n int) {
	t.Helper()
	for off := from; off < to; off += n {
		p := data[off:min(off+n, to)]
		if _, err := u.Write(int64(off), p, xfer.CRC32C(p)); err != nil {
			t.Fatalf("Write at %d: %v", off, err)
		}
	}
}

func checkLanded(t *testing.T, f *fixture, name string, data []byte) {
	t.Helper()
	got, err := f.object(name)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("object %s: %d bytes, err %v; want the %d bytes sent", name, len(got), err, len(data))
	}
	if n := f.multiparts(); n != 0 {
		t.Fatalf("%d multipart uploads left open", n)
	}
	if n := f.stateObjects(); n != 0 {
		t.Fatalf("%d state objects left", n)
	}
}
