package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/faultproxy"
	"github.com/sluicehq/sluice/internal/xfer"
)

const mib = 1 << 20

// A file of several parts lands whole under its name, verified, and
// leaves no multipart upload and no state behind.
func TestS3UploadLands(t *testing.T) {
	f := newFixture(t)
	s := f.server(Options{})
	data := randomBytes(20*mib+123, 1)
	u, err := s.Begin("big.bin", int64(len(data)), sum256(data), "", false)
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, u, data, 0, 12*mib, 512<<10)
	if _, err := f.object("big.bin"); err == nil {
		t.Fatal("the object is visible before the upload finished")
	}
	writeChunks(t, u, data, 12*mib, len(data), 512<<10)
	sum, err := u.Finish(sum256(data), "test")
	u.Release()
	if err != nil || !bytes.Equal(sum, sum256(data)) {
		t.Fatalf("Finish: %x, %v", sum, err)
	}
	checkLanded(t, f, "big.bin", data)
	if got := s.Stats.UploadsCompleted.Load(); got != 1 {
		t.Fatalf("UploadsCompleted %d", got)
	}
	if got, most := s.Stats.BufferPeak.Load(), int64(partsInFlight+1)*DefaultPartSize; got > most || got < DefaultPartSize {
		t.Fatalf("buffer peak %d, want at most %d: the part buffers are the upload's memory, whatever the file's size", got, most)
	}
	if got := s.Stats.BufferBytes.Load(); got != 0 {
		t.Fatalf("%d bytes of part buffers still counted after Release", got)
	}
	// An empty file has no parts; it lands too.
	e, err := s.Begin("empty", 0, nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Finish(nil, "test"); err != nil {
		t.Fatal(err)
	}
	e.Release()
	checkLanded(t, f, "empty", nil)
}

// A server killed mid-part (its Upload abandoned: no Release, its lease
// left live): another server on the same store resumes the upload from
// what the store holds (the parts it lists, and a checkpoint's tail) once
// the lease ends, and the file lands whole.
func TestS3ResumeOnAnotherServer(t *testing.T) {
	f := newFixture(t)
	var clk clock
	a := f.server(Options{})
	b := f.server(Options{Now: clk.now})
	data := randomBytes(19*mib, 2)
	ua, err := a.Begin("moved.bin", int64(len(data)), nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, ua, data, 0, 10*mib, mib) // part 1 sent, 2 MiB in a's buffer
	if err := ua.Checkpoint(); err != nil {  // the 2 MiB saved as the tail
		t.Fatal(err)
	}
	writeChunks(t, ua, data, 10*mib, 13*mib, mib) // 3 MiB more only in a's memory: lost with it
	// a is killed here: nothing released.
	if _, err := b.Begin("moved.bin", int64(len(data)), nil, "", false); !errors.Is(err, xfer.ErrBusy) {
		t.Fatalf("Begin on b while a's lease is live: %v, want busy", err)
	}
	in, err := b.Stat("moved.bin")
	if err != nil || in.Offset != 10*mib || !in.Active {
		t.Fatalf("Stat on b: %+v, %v; want offset 10 MiB (the part and the tail), active", in, err)
	}
	clk.advance(DefaultLeaseTTL + time.Second)
	ub, err := b.Begin("moved.bin", int64(len(data)), nil, "", false)
	if err != nil {
		t.Fatalf("Begin on b after a's lease ended: %v", err)
	}
	if off := ub.Offset(); off != 10*mib {
		t.Fatalf("b resumes at %d, want %d", off, 10*mib)
	}
	writeChunks(t, ub, data, 10*mib, len(data), 3*mib)
	if _, err := ub.Finish(sum256(data), "test"); err != nil {
		t.Fatal(err)
	}
	ub.Release()
	checkLanded(t, f, "moved.bin", data)
}

// Two servers writing one upload at once: the second is told it is busy
// while the first's lease lives; once it has ended (the first frozen past
// it) the second takes the upload, and the first, waking, is told at its
// next write and cannot complete it.
func TestS3TwoServersOneWins(t *testing.T) {
	f := newFixture(t)
	var clk clock
	a := f.server(Options{})
	b := f.server(Options{Now: clk.now})
	data := randomBytes(12*mib, 3)
	ua, err := a.BeginKept("race.bin", int64(len(data)), nil, "", true)
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, ua, data, 0, 9*mib, mib)
	if err := ua.Checkpoint(); err != nil { // part 1 published, 1 MiB as the tail
		t.Fatal(err)
	}
	id := ua.Info().ID
	if _, err := b.Acquire(context.Background(), id); !errors.Is(err, xfer.ErrBusy) {
		t.Fatalf("b.Acquire while a writes: %v, want busy", err)
	}
	clk.advance(DefaultLeaseTTL + time.Second)
	ub, err := b.Acquire(context.Background(), id)
	if err != nil {
		t.Fatalf("b.Acquire after a's lease ended: %v", err)
	}
	if off := ub.Offset(); off != 9*mib {
		t.Fatalf("b at %d, want 9 MiB (a's checkpoint)", off)
	}
	// a goes on: its next part is refused, and so is its Finish.
	p := data[9*mib:]
	_, err = ua.Write(9*mib, p, xfer.CRC32C(p))
	if !errors.Is(err, xfer.ErrBusy) || !strings.Contains(err.Error(), "another server") {
		t.Fatalf("a's write after b took over: %v, want busy (another server)", err)
	}
	if _, err := ua.Finish(nil, "test"); err == nil {
		t.Fatal("a finished an upload b holds")
	}
	ua.Release()
	writeChunks(t, ub, data, 9*mib, len(data), mib)
	if _, err := ub.Finish(nil, "test"); err != nil {
		t.Fatal(err)
	}
	ub.Release()
	checkLanded(t, f, "race.bin", data)
	if in, err := a.StatID(id); err != nil || !in.Finished {
		t.Fatalf("a.StatID of the finished upload: %+v, %v", in, err)
	}
}

// A whole file whose SHA-256 is not the expected one: refused, the
// multipart upload aborted, nothing under the name.
func TestS3ChecksumMismatchNothingVisible(t *testing.T) {
	f := newFixture(t)
	s := f.server(Options{})
	data := randomBytes(9*mib, 4)
	wrong := sha256.Sum256([]byte("another file"))
	u, err := s.Begin("bad.bin", int64(len(data)), wrong[:], "", false)
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, u, data, 0, len(data), mib)
	_, err = u.Finish(nil, "test")
	u.Release()
	if !errors.Is(err, xfer.ErrChecksum) {
		t.Fatalf("Finish: %v, want a checksum mismatch", err)
	}
	if _, err := f.object("bad.bin"); err == nil || !notFound(err) {
		t.Fatalf("object bad.bin after the mismatch: %v, want none", err)
	}
	if n := f.multiparts(); n != 0 {
		t.Fatalf("%d multipart uploads left open", n)
	}
	if _, err := s.Stat("bad.bin"); !errors.Is(err, xfer.ErrNotFound) {
		t.Fatalf("Stat after the mismatch: %v", err)
	}
	// A chunk whose CRC32C is wrong is refused, nothing taken.
	u, err = s.Begin("crc.bin", 10, nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Release()
	if _, err := u.Write(0, []byte("0123456789"), 1); !errors.Is(err, xfer.ErrChecksum) || u.Offset() != 0 {
		t.Fatalf("bad CRC: %v, offset %d", err, u.Offset())
	}
}

// The store unreachable mid-upload: the write fails with a clear
// retryable error (ErrUnreachable, the wire's internal code), and once the
// store is back the upload resumes from what it holds and lands.
func TestS3StoreUnreachableMidUpload(t *testing.T) {
	f := newFixture(t)
	p := faultproxy.New(t, strings.TrimPrefix(f.loc.Endpoint, "http://"))
	via := f.loc
	via.Endpoint = "http://" + p.Addr()
	s := f.serverAt(via, Options{})
	data := randomBytes(18*mib, 5)
	u, err := s.Begin("down.bin", int64(len(data)), nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, u, data, 0, 9*mib, mib)
	if err := u.Checkpoint(); err != nil { // part 1 and a 1 MiB tail in the store
		t.Fatal(err)
	}
	p.Refuse(true)
	p.CutAll()
	// Parts go in the background: the refusal comes at a later write,
	// or at Finish, which waits for them.
	var werr error
	for off := 9 * mib; off < len(data) && werr == nil; off += mib {
		c := data[off : off+mib]
		_, werr = u.Write(int64(off), c, xfer.CRC32C(c))
	}
	if werr == nil {
		_, werr = u.Finish(nil, "test")
	}
	if !errors.Is(werr, ErrUnreachable) || xfer.CodeOf(werr) != xfer.CodeInternal {
		t.Fatalf("write with the store gone: %v, want ErrUnreachable (retryable)", werr)
	}
	u.Release()
	p.Refuse(false)
	u, err = s.Begin("down.bin", int64(len(data)), nil, "", false)
	if err != nil {
		t.Fatalf("Begin once the store is back: %v", err)
	}
	if off := u.Offset(); off != 9*mib {
		t.Fatalf("resumed at %d, want 9 MiB (the checkpoint before)", off)
	}
	writeChunks(t, u, data, 9*mib, len(data), mib)
	if _, err := u.Finish(nil, "test"); err != nil {
		t.Fatal(err)
	}
	u.Release()
	checkLanded(t, f, "down.bin", data)
}

// Credentials the store refuses: Open fails at once with a clear
// permission error, not at the first part of the first upload.
func TestS3PermissionDenied(t *testing.T) {
	f := newFixture(t)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
	c, err := Client(f.loc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(f.loc, c, Options{})
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Open with a wrong secret: %v, want ErrDenied", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	if _, err := Client(f.loc); !errors.Is(err, errNoCredentials) {
		t.Fatalf("Client without credentials: %v", err)
	}
}

// tus PATCH bodies (ReadFrom) that end mid-part: each is durable on
// return (the tail object), so another server resumes at the exact
// offset; a body whose checksum is wrong is refused whole, even when it
// filled a part, and the offset stays where it began.
func TestS3TusBodiesResumeExactly(t *testing.T) {
	f := newFixture(t)
	var clk clock
	a := f.server(Options{})
	b := f.server(Options{Now: clk.now})
	data := randomBytes(20*mib, 6)
	u, err := a.BeginKept("", int64(len(data)), nil, "filename x", true)
	if err != nil {
		t.Fatal(err)
	}
	id := u.Info().ID
	body := func(from, to int) (*bytes.Reader, []byte) {
		s := sha256.Sum256(data[from:to])
		return bytes.NewReader(data[from:to]), s[:]
	}
	r, want := body(0, 6*mib)
	if n, err := u.ReadFrom(0, r, sha256.New(), want); err != nil || n != 6*mib {
		t.Fatalf("first body: %d, %v", n, err)
	}
	r, _ = body(6*mib, 15*mib)
	if n, err := u.ReadFrom(6*mib, r, sha256.New(), make([]byte, 32)); !errors.Is(err, xfer.ErrChecksum) || n != 6*mib {
		t.Fatalf("body with a wrong checksum: %d, %v", n, err)
	}
	u.Release()
	if in, err := b.StatID(id); err != nil || in.Offset != 6*mib {
		t.Fatalf("b.StatID: %+v, %v; want offset 6 MiB", in, err)
	}
	ub, err := b.Acquire(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	r, want = body(6*mib, 15*mib)
	if n, err := ub.ReadFrom(6*mib, r, sha256.New(), want); err != nil || n != 15*mib {
		t.Fatalf("b's body: %d, %v", n, err)
	}
	r, _ = body(15*mib, len(data))
	if n, err := ub.ReadFrom(15*mib, r, nil, nil); err != nil || n != int64(len(data)) {
		t.Fatalf("last body: %d, %v", n, err)
	}
	if _, err := ub.Finish(nil, "tus"); err != nil {
		t.Fatal(err)
	}
	ub.Release()
	checkLanded(t, f, id, data)
	in, err := a.StatID(id)
	if err != nil || !in.Finished || in.Offset != int64(len(data)) || in.Meta != "filename x" {
		t.Fatalf("StatID of the finished upload: %+v, %v", in, err)
	}
	if !a.RemoveFinished(id) {
		t.Fatal("RemoveFinished: false")
	}
	if _, err := a.StatID(id); !errors.Is(err, xfer.ErrNotFound) {
		t.Fatalf("StatID after RemoveFinished: %v", err)
	}
}

// Expire aborts a multipart upload idle past --expire (tus's
// Upload-Expires), with its state; one a writer holds stays.
func TestS3ExpireAbortsStaleUploads(t *testing.T) {
	f := newFixture(t)
	var clk clock
	s := f.server(Options{Expire: time.Hour, Now: clk.now})
	data := randomBytes(9*mib, 7)
	idle, err := s.Begin("idle.bin", int64(len(data)), nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, idle, data, 0, 9*mib-1, mib)
	if exp := idle.Info().Expires; exp.IsZero() {
		t.Fatal("no Expires on an expiring store's upload")
	}
	idle.Release()
	held, err := s.Begin("held.bin", 10, nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	if n := s.Expire(clk.now()); n != 0 {
		t.Fatalf("Expire before the hour removed %d", n)
	}
	clk.advance(2 * time.Hour)
	if n := s.Expire(clk.now()); n != 1 {
		t.Fatalf("Expire after the hour removed %d, want 1 (the idle upload; the held one stays)", n)
	}
	if _, err := s.Stat("idle.bin"); !errors.Is(err, xfer.ErrNotFound) {
		t.Fatalf("Stat of the expired upload: %v", err)
	}
	if n := f.multiparts(); n != 1 {
		t.Fatalf("%d multipart uploads open, want 1 (the held one)", n)
	}
}
