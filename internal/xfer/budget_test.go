package xfer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestUploadBuffersWithinBudget: 16 uploads at once, four on each
// transport (gRPC, RSocket, tus, HTTP POST), through a store whose
// buffer budget is four blocks, one upload's worth at full speed: the
// blocks out never exceed the budget (without it, each upload took its
// own, up to 64 MiB here), and every upload lands whole with the right
// SHA-256.
func TestUploadBuffersWithinBudget(t *testing.T) {
	const budget = nBlocks * blockSize
	e := startEnv(t, Options{BufferBytes: budget})
	post := "http://" + e.srv.Addrs.HTTP + "/post/"
	data := randBytes(4<<20+321, 30)
	src := tempFile(t, data)
	want := sha256.Sum256(data)
	urls := e.urls()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		tr := []string{"grpc", "rsocket", "tus", "http"}[i%4]
		name := fmt.Sprintf("f-%s-%d", tr, i)
		wg.Go(func() {
			var sum []byte
			var err error
			if tr == "http" {
				sum, err = postFile(post+name, data)
			} else {
				sum, err = Send(ctxT(t), urls[tr], src, SendOptions{Name: name, StateDir: t.TempDir()})
			}
			if err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				return
			}
			if got, err := os.ReadFile(filepath.Join(e.dir, name)); err != nil || !bytes.Equal(got, data) || !bytes.Equal(sum, want[:]) {
				errs <- fmt.Errorf("%s: landed differently (sum %x, %v)", name, sum, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := &e.store.Stats
	if peak := st.BufferPeak.Load(); peak > budget || peak == 0 {
		t.Errorf("upload buffers peaked at %d bytes, the budget is %d", peak, budget)
	}
	if n := st.BufferBytes.Load(); n != 0 {
		t.Errorf("%d bytes of upload buffers still out after every upload ended", n)
	}
	t.Logf("peak %d bytes, %d waits for a block", st.BufferPeak.Load(), st.BufferWaits.Load())
}

// postFile POSTs data to url (PostHandler) and returns the SHA-256 it
// answers.
func postFile(url string, data []byte) ([]byte, error) {
	resp, err := http.Post(url, "application/octet-stream", bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST: %s: %s", resp.Status, body)
	}
	return hex.DecodeString(strings.TrimSpace(string(body)))
}
