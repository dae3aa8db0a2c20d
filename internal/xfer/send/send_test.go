package send

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	xferv1 "github.com/sluicehq/sluice/api/xfer/v1"
	"github.com/sluicehq/sluice/internal/testkit/faultproxy"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/internal/xfer/rsocketxfer"
	"github.com/sluicehq/sluice/rsocket"
)

// startEnv is a store served on every transport.
func startEnv(t *testing.T, o diskstore.Options) *xfertest.Env[*diskstore.Uploads] {
	t.Helper()
	return xfertest.StartEnv(t, func(dir string) (*diskstore.Uploads, error) { return diskstore.Open(dir, o) }, xfertest.AllTransports)
}

func TestSendEachTransport(t *testing.T) {
	e := startEnv(t, diskstore.Options{SyncEvery: 1 << 20})
	data := xfertest.RandBytes(3<<20+123, 10)
	src := xfertest.TempFile(t, data)
	for tr, to := range e.URLs() {
		t.Run(tr, func(t *testing.T) {
			sum, err := File(xfertest.Ctx(t), to, src, Options{Name: "f-" + tr, Chunk: 256 << 10, StateDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			xfertest.CheckLanded(t, e.Dir, "f-"+tr, data, sum)
		})
	}
}

func TestSendEmptyFile(t *testing.T) {
	e := startEnv(t, diskstore.Options{})
	src := xfertest.TempFile(t, nil)
	for tr, to := range e.URLs() {
		sum, err := File(xfertest.Ctx(t), to, src, Options{Name: "e-" + tr, StateDir: t.TempDir()})
		if err != nil {
			t.Fatalf("%s: %v", tr, err)
		}
		xfertest.CheckLanded(t, e.Dir, "e-"+tr, nil, sum)
	}
}

// A chunk whose bits flip on the way is refused (CRC32C, or tus's
// Upload-Checksum) and sent again; the file lands intact.
func TestBadChunkRefusedAndResent(t *testing.T) {
	e := startEnv(t, diskstore.Options{})
	data := xfertest.RandBytes(1<<20, 11)
	src := xfertest.TempFile(t, data)
	for tr, to := range e.URLs() {
		t.Run(tr, func(t *testing.T) {
			before := e.Store.Stats.ChunksRejected.Load()
			var once sync.Once
			corrupt := func(off int64) (hit bool) {
				if off == 512<<10 {
					once.Do(func() { hit = true })
				}
				return hit
			}
			sum, err := File(xfertest.Ctx(t), to, src, Options{Name: "c-" + tr, Chunk: 128 << 10, StateDir: t.TempDir(), corrupt: corrupt})
			if err != nil {
				t.Fatal(err)
			}
			xfertest.CheckLanded(t, e.Dir, "c-"+tr, data, sum)
			if n := e.Store.Stats.ChunksRejected.Load() - before; n != 1 {
				t.Fatalf("%d chunks rejected, want 1", n)
			}
		})
	}
}

// Send continues from what the server holds.
func TestSendResumesFromServerOffset(t *testing.T) {
	e := startEnv(t, diskstore.Options{})
	data := xfertest.RandBytes(1<<20, 12)
	src := xfertest.TempFile(t, data)
	for _, tr := range []string{"grpc", "rsocket"} {
		u, err := e.Store.Begin("r-"+tr, int64(len(data)), nil, "", false)
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, u, data[:300_000], 0, 100_000)
		u.Release()
		var first atomic.Int64
		first.Store(-1)
		sum, err := File(xfertest.Ctx(t), e.URLs()[tr], src, Options{Name: "r-" + tr, Progress: func(done, total int64) {
			first.CompareAndSwap(-1, done)
		}})
		if err != nil {
			t.Fatal(err)
		}
		if first.Load() != 300_000 {
			t.Fatalf("%s started at %d, want 300000", tr, first.Load())
		}
		xfertest.CheckLanded(t, e.Dir, "r-"+tr, data, sum)
	}
}

func TestSendRefusals(t *testing.T) {
	e := startEnv(t, diskstore.Options{MaxSize: 1000})
	src := xfertest.TempFile(t, xfertest.RandBytes(2000, 13))
	for tr, to := range e.URLs() {
		_, err := File(xfertest.Ctx(t), to, src, Options{Name: "big", StateDir: t.TempDir()})
		if !errors.Is(err, xfer.ErrTooLarge) {
			t.Errorf("%s: oversize: %v", tr, err)
		}
		if _, err := File(xfertest.Ctx(t), to, src, Options{Name: "../x"}); !errors.Is(err, xfer.ErrBadName) {
			t.Errorf("%s: traversal: %v", tr, err)
		}
	}
	if ents, _ := os.ReadDir(e.Dir); len(ents) != 1 {
		t.Fatalf("DIR holds %d entries, want only .partial", len(ents))
	}
}

func TestConnectionResetResumes(t *testing.T) {
	e := startEnv(t, diskstore.Options{SyncEvery: 256 << 10})
	data := xfertest.RandBytes(4<<20, 14)
	src := xfertest.TempFile(t, data)
	targets := map[string]func(addr string) string{
		"grpc":    func(a string) string { return "grpc://" + a },
		"rsocket": func(a string) string { return "tcp://" + a },
		"tus":     func(a string) string { return "http://" + a + "/files/" },
	}
	servers := map[string]string{"grpc": e.Srv.Addrs.GRPC, "rsocket": e.Srv.Addrs.RSocket[len("tcp://"):], "tus": e.Srv.Addrs.TUS}
	for tr, mk := range targets {
		t.Run(tr, func(t *testing.T) {
			// The first 2 connections are reset (RST, as a dropped link
			// or a killed peer) once they carried 1.5 MiB to the server.
			p := faultproxy.New(t, servers[tr])
			p.CutNext(faultproxy.Cuts{Count: 2, Up: 1500 << 10, Reset: true})
			sum, err := File(xfertest.Ctx(t), mk(p.Addr()), src, Options{Name: "x-" + tr, Chunk: 128 << 10, StateDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			xfertest.CheckLanded(t, e.Dir, "x-"+tr, data, sum)
			if p.Accepted() <= 2 {
				t.Fatal("the proxy never cut a connection")
			}
		})
	}
}

// Two uploads of one name at once: the second is refused while the first
// writes, and DIR/NAME is one of them whole.
func TestConcurrentSameName(t *testing.T) {
	e := startEnv(t, diskstore.Options{})
	u, err := e.Store.Begin("same", 100, nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	src := xfertest.TempFile(t, xfertest.RandBytes(100, 15))
	for tr, to := range e.URLs() {
		if tr == "tus" {
			continue // tus names uploads by id: a PATCH to a held id takes it over (TestTUSStalledPatchTakenOver)
		}
		_, err := File(xfertest.Ctx(t), to, src, Options{Name: "same", Attempts: 2})
		if !errors.Is(err, xfer.ErrBusy) || !bytes.Contains([]byte(err.Error()), []byte("upload of same already in progress")) {
			t.Errorf("%s: %v", tr, err)
		}
	}
	u.Release()
}

func tempFileB(b *testing.B, data []byte) string {
	p := filepath.Join(b.TempDir(), "src.bin")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return p
}

// TestFrozenClientReleasesUpload: a client starts an upload over gRPC or
// RSocket, sends a chunk, and freezes (its connection neither closes nor
// carries anything). The server notices through keepalive (gRPC: its
// pings go unanswered; RSocket: the client's KEEPALIVEs stop) and drops
// the connection, which releases the upload: the same name resumes from
// a new connection and lands whole. Before gRPC had server keepalive the
// name stayed "already in progress" for as long as the kernel kept the
// dead connection.
func TestFrozenClientReleasesUpload(t *testing.T) {
	// The server's keepalive pings go after the idle timeout when it is
	// shorter than their 30 s (internal/xfer/grpcxfer): 1 s, the least
	// grpc-go allows, and an answer due within 1 s.
	e := startEnv(t, diskstore.Options{IdleTimeout: time.Second})
	data := xfertest.RandBytes(1<<20, 21)
	chunk := data[:256<<10]
	for _, tr := range []string{"grpc", "rsocket"} {
		t.Run(tr, func(t *testing.T) {
			name := "frozen-" + tr
			ctx := xfertest.Ctx(t)
			begin := &xferv1.Begin{Name: name, Size: int64(len(data))}
			received := e.Store.Stats.BytesReceived.Load() + int64(len(chunk))
			switch tr {
			case "grpc":
				p := faultproxy.New(t, e.Srv.Addrs.GRPC)
				cc, err := grpc.NewClient(p.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				defer cc.Close()
				st, err := xferv1.NewXferClient(cc).Upload(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := st.Send(&xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Begin{Begin: begin}}); err != nil {
					t.Fatal(err)
				}
				if err := st.Send(&xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Chunk{Chunk: &xferv1.Chunk{Data: chunk, Crc32C: xfer.CRC32C(chunk)}}}); err != nil {
					t.Fatal(err)
				}
				waitReceived(t, e.Store, received)
				p.Freeze()
			case "rsocket":
				p := faultproxy.New(t, strings.TrimPrefix(e.Srv.Addrs.RSocket, "tcp://"))
				c, err := rsocket.Dial(ctx, "tcp://"+p.Addr(), rsocket.WithKeepalive(100*time.Millisecond, time.Second))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				b := rsocketxfer.AppendBegin(nil, rsocketxfer.Begin{Name: name, Size: int64(len(data))})
				ch, err := c.RequestChannel(ctx, rsocket.Payload{Metadata: []byte(rsocketxfer.MetaUpload), Data: b}, 64)
				if err != nil {
					t.Fatal(err)
				}
				meta := rsocketxfer.AppendChunkMeta(nil, xfer.CRC32C(chunk))
				if err := ch.Send(rsocket.Payload{Metadata: meta, Data: chunk}); err != nil {
					t.Fatal(err)
				}
				waitReceived(t, e.Store, received)
				p.Freeze()
			}
			if in, err := e.Store.Stat(name); err != nil || !in.Active {
				t.Fatalf("the frozen client's upload: %+v, %v; want it held", in, err)
			}
			deadline := time.Now().Add(45 * time.Second)
			for {
				in, err := e.Store.Stat(name)
				if err == nil && !in.Active {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the frozen client still holds its upload: %+v, %v", in, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			sum, err := File(ctx, e.URLs()[tr], xfertest.TempFile(t, data), Options{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			xfertest.CheckLanded(t, e.Dir, name, data, sum)
		})
	}
}

// waitReceived waits until the store has received n bytes in all (what
// the test's client sent has arrived).
func waitReceived(t *testing.T, s *diskstore.Uploads, n int64) {
	t.Helper()
	if !testwait.Until(func() bool { return s.Stats.BytesReceived.Load() >= n }) {
		t.Fatalf("the server received %d bytes, want %d", s.Stats.BytesReceived.Load(), n)
	}
}

// writeAll writes data[from:] in chunks of n.
func writeAll(t *testing.T, u xfer.BackendUpload, data []byte, from, n int) {
	t.Helper()
	for off := from; off < len(data); off += n {
		p := data[off:min(len(data), off+n)]
		if _, err := u.Write(int64(off), p, xfer.CRC32C(p)); err != nil {
			t.Fatalf("write at %d: %v", off, err)
		}
	}
}

// A transport's Stream.Chunk may be handed a buffer that is overwritten
// as soon as it returns (the upload loop reuses its blocks): what lands
// is what the buffer held during the call. The RSocket client relies on
// Send having encoded the frame when it returns, and no longer copies.
func TestChunkBufferReusedAfterReturn(t *testing.T) {
	e := startEnv(t, diskstore.Options{})
	data := xfertest.RandBytes(2<<20+7, 14)
	const chunk = 64 << 10
	for _, name := range []string{"grpc", "rsocket"} {
		t.Run(name, func(t *testing.T) {
			o := Options{Name: "reuse-" + name, StateDir: t.TempDir()}
			tr, err := newTransport(e.URLs()[name], "reuse", &o)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			st, err := tr.Begin(xfertest.Ctx(t), xfer.Outgoing{Name: o.Name, Size: int64(len(data))})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			buf := make([]byte, chunk)
			for off := 0; off < len(data); off += chunk {
				p := buf[:copy(buf, data[off:min(off+chunk, len(data))])]
				if err := st.Chunk(xfer.Chunk{Off: int64(off), Data: p, CRC32C: xfer.CRC32C(p), Orig: p}); err != nil {
					t.Fatal(st.Cause(err))
				}
				for i := range p {
					p[i] = 0xa5 // what a reused block would hold next
				}
			}
			want := sha256.Sum256(data)
			sum, err := st.Finish(want[:])
			if err != nil {
				t.Fatal(err)
			}
			xfertest.CheckLanded(t, e.Dir, o.Name, data, sum)
		})
	}
}

// With Options.SHA256 the sender does not hash: the file lands when the
// given hash is the file's, and a wrong one is refused by the server's
// own hash once, without the loop sending the file again.
func TestSendKnownSHA256(t *testing.T) {
	e := startEnv(t, diskstore.Options{})
	data := xfertest.RandBytes(1<<20+5, 15)
	good := sha256.Sum256(data)
	bad := good
	bad[0] ^= 1
	for tr, to := range e.URLs() {
		t.Run(tr, func(t *testing.T) {
			sum, err := Bytes(xfertest.Ctx(t), to, data, Options{Name: "k-" + tr, Chunk: 256 << 10, SHA256: good[:], StateDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			xfertest.CheckLanded(t, e.Dir, "k-"+tr, data, sum)
			failed := e.Store.Stats.UploadsFailed.Load()
			_, err = Bytes(xfertest.Ctx(t), to, data, Options{Name: "w-" + tr, Chunk: 256 << 10, SHA256: bad[:], StateDir: t.TempDir()})
			if !errors.Is(err, xfer.ErrChecksum) {
				t.Fatalf("wrong SHA256: %v, want a checksum refusal", err)
			}
			if n := e.Store.Stats.UploadsFailed.Load() - failed; n != 1 {
				t.Fatalf("the file was sent %d times, want once", n)
			}
			if _, err := os.Stat(filepath.Join(e.Dir, "w-"+tr)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the file sent with a wrong SHA256 landed (%v)", err)
			}
		})
	}
}
