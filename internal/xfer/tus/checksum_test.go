package tus_test

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/internal/xfer/tus"
)

func crc32cB64(p []byte) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)))
	return b64(b[:])
}

// A PATCH may carry a CRC32C as its Upload-Checksum (the algorithm
// sluice's client uses with a server that lists it): a mismatch is 460
// and keeps nothing, a match is written. The answers to POST and HEAD
// list the algorithms, so that a client learns them without an OPTIONS.
func TestTUSChecksumCRC32C(t *testing.T) {
	c := newTUS(t, diskstore.Options{})
	data := []byte("hello, crc32c!")
	r := c.do("POST", "/files/", nil, "Upload-Length", strconv.Itoa(len(data)))
	c.want(r, 201)
	loc := r.Header.Get("Location")
	for _, r := range []*http.Response{r, c.do("HEAD", loc, nil)} {
		if got := r.Header.Get("Tus-Checksum-Algorithm"); !strings.Contains(got, "crc32c") {
			t.Fatalf("%s answered Tus-Checksum-Algorithm %q, want crc32c listed", r.Request.Method, got)
		}
	}
	c.want(c.do("PATCH", loc, data[:4], "Content-Type", octet, "Upload-Offset", "0", "Upload-Checksum", "crc32c "+crc32cB64([]byte("other"))), 460)
	if r = c.do("HEAD", loc, nil); r.Header.Get("Upload-Offset") != "0" {
		t.Fatalf("offset %s after a 460", r.Header.Get("Upload-Offset"))
	}
	c.want(c.do("PATCH", loc, data[:4], "Content-Type", octet, "Upload-Offset", "0", "Upload-Checksum", "crc32c AAAA"), 400) // 3 bytes, not 4
	c.want(c.do("PATCH", loc, data[:4], "Content-Type", octet, "Upload-Offset", "0", "Upload-Checksum", "crc32c "+crc32cB64(data[:4])), 204)
	c.want(c.do("PATCH", loc, data[4:], "Content-Type", octet, "Upload-Offset", "4", "Upload-Checksum", "crc32c "+crc32cB64(data[4:])), 204)
}

// checksumAlgos serves tus over a fresh store and records the algorithm
// of each PATCH's Upload-Checksum; with hide, its answers list no
// checksum algorithms, as a tus server without crc32c does not.
func checksumAlgos(t *testing.T, hide bool) (url string, algos func() []string) {
	s := openT(t, t.TempDir(), diskstore.Options{})
	h := tus.Handler(s, "/files/")
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			algo, _, _ := strings.Cut(r.Header.Get("Upload-Checksum"), " ")
			mu.Lock()
			seen = append(seen, algo)
			mu.Unlock()
		}
		if hide {
			w = hideAlgorithms{w}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/files/", func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }
}

// hideAlgorithms drops Tus-Checksum-Algorithm from an answer.
type hideAlgorithms struct{ http.ResponseWriter }

func (h hideAlgorithms) WriteHeader(code int) {
	h.Header().Del("Tus-Checksum-Algorithm")
	h.ResponseWriter.WriteHeader(code)
}

// sendChunks uploads data in chunks of n through a tus.Client, as the
// upload loop does.
func sendChunks(t *testing.T, url string, data []byte, n int) {
	ctx := context.Background()
	cl, err := tus.NewClient(url, "fp", "f", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sum := sha256Of(data)
	st, err := cl.Begin(ctx, xfer.Outgoing{Name: "f", Size: int64(len(data)), SHA256: func() ([]byte, error) { return sum, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for off := 0; off < len(data); off += n {
		p := data[off:min(off+n, len(data))]
		if err := st.Chunk(xfer.Chunk{Off: int64(off), Data: p, CRC32C: xfer.CRC32C(p), Orig: p}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Finish(sum); err != nil {
		t.Fatal(err)
	}
}

// sluice's client checksums each PATCH with the CRC32C the loop computed
// when the server lists crc32c, and with SHA-256 (in the tus registry)
// when it does not.
func TestClientPatchChecksum(t *testing.T) {
	data := []byte(strings.Repeat("0123456789", 1000))
	for _, tc := range []struct {
		hide bool
		want string
	}{{false, "crc32c"}, {true, "sha256"}} {
		url, algos := checksumAlgos(t, tc.hide)
		sendChunks(t, url, data, 3000)
		got := algos()
		if len(got) != 4 {
			t.Fatalf("hidden %v: %d PATCHes, want 4", tc.hide, len(got))
		}
		for _, a := range got {
			if a != tc.want {
				t.Fatalf("hidden %v: PATCH checksums %v, want all %s", tc.hide, got, tc.want)
			}
		}
	}
}
